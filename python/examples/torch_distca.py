"""DistCA with torch.distributed: core attention scheduled by a Fulcrum plan, on CPU ranks over gloo.

Each rank holds the Q/K/V rows of the tokens the packing placed on it. Every rank plans the same batch
(planning is deterministic), then:
  1. dispatch: all-to-all the Q rows and K/V rows each CA-task needs to the task's server;
  2. compute: each server runs one fused fulcrum.attention_forward over all its tasks, on NumPy views
     of its torch workspaces (no copies);
  3. return: all-to-all each task's O and LSE rows back to the rows' owners, who merge the parts of a
     row computed on several servers by their log-sum-exp.
Each rank then checks its rows against plain causal attention in fp64 (torch), and raises on a mismatch.

Run:  PYTHONPATH=build/dev/python python3 python/examples/torch_distca.py   (2 processes, gloo, CPU)
"""
from __future__ import annotations

import math
import os
import socket
import sys
import time
from collections import defaultdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fulcrum

RANKS = 2
TOKENS_PER_RANK = 1024
Q_HEADS, KV_HEADS, HEAD_DIM = 4, 2, 32  # GQA: two query heads per K/V head
HEADS_PER_TENSOR = (Q_HEADS, KV_HEADS, KV_HEADS)  # Q, K, V
# One long document split across both ranks (its causal work piles up on rank 1's tail) and short ones:
# the imbalance DistCA fixes by moving attention shards, so the plan must move work between ranks.
LENGTHS = [1536, 200, 77, 128, 59]
SEED = 7
# fp32 kernel (fp32 accumulation) against an fp64 reference on O(1) values: errors are ~1e-6.
TOLERANCE = 1e-4


def full_qkv(batch):
    """Every document's Q, K, V from one seed: each rank builds its own rows, and the fp64 reference."""
    g = torch.Generator().manual_seed(SEED)
    return [
        tuple(torch.randn(doc.length, h, HEAD_DIM, generator=g, dtype=torch.float64) for h in HEADS_PER_TENSOR)
        for doc in batch.documents
    ]


def pieces_by_owner(batch, doc, tokens):
    """Splits document `doc`'s tokens [begin, end) at its segments: (owner rank, begin, end) pieces."""
    begin, end = tokens
    for s in batch.segments:
        if s.doc == doc:
            lo, hi = max(begin, s.tokens[0]), min(end, s.tokens[1])
            if lo < hi:
                yield s.rank, lo, hi


def workspace_layout(assignment):
    """Per server: its tasks with their Q and K/V workspace rows, and every piece to move, keyed by
    (owner, server) in one global order that senders and receivers both derive from the plan."""
    batch = assignment.batch
    tasks = defaultdict(list)  # server -> [(task, q rows [(row, begin, end)], kv row)]
    q_pieces = defaultdict(list)  # (owner, server) -> [(doc, begin, end, workspace row)]
    kv_pieces = defaultdict(list)
    q_rows, kv_rows = defaultdict(int), defaultdict(int)
    for task in assignment.tasks:
        s = task.server
        spans = []
        for begin, end in task.queries:
            spans.append((q_rows[s], begin, end))
            for owner, lo, hi in pieces_by_owner(batch, task.doc, (begin, end)):
                q_pieces[owner, s].append((task.doc, lo, hi, q_rows[s] + lo - begin))
            q_rows[s] += end - begin
        k_begin, k_end = task.keys
        for owner, lo, hi in pieces_by_owner(batch, task.doc, task.keys):
            kv_pieces[owner, s].append((task.doc, lo, hi, kv_rows[s] + lo - k_begin))
        tasks[s].append((task, spans, kv_rows[s]))
        kv_rows[s] += k_end - k_begin
    return tasks, q_pieces, kv_pieces, q_rows, kv_rows


def exchange(width, pieces_out, pieces_in, gather, scatter):
    """One all_to_all_single of rows `width` floats wide: this rank sends gather(piece) for each piece of
    pieces_out[dst] to dst, in order, and scatter(piece, rows) places what it receives from each src in
    pieces_in[src]'s order. A piece is (doc, begin, end, workspace row)."""
    world = dist.get_world_size()
    send_rows = [sum(p[2] - p[1] for p in pieces) for pieces in pieces_out]
    recv_rows = [sum(p[2] - p[1] for p in pieces) for pieces in pieces_in]
    send = [gather(p) for dst in range(world) for p in pieces_out[dst]]
    send = torch.cat(send) if send else torch.empty(0, width)
    recv = torch.empty(sum(recv_rows), width)
    dist.all_to_all_single(recv, send.reshape(-1, width).contiguous(), recv_rows, send_rows)
    offset = 0
    for src in range(world):
        for p in pieces_in[src]:
            n = p[2] - p[1]
            scatter(p, recv[offset : offset + n])
            offset += n


def run_rank(rank: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # Loopback only: in containers the hostname can resolve to an address gloo cannot connect through.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=RANKS, timeout=timedelta(seconds=120))
    torch.set_num_threads(1)
    world = dist.get_world_size()

    model = fulcrum.ModelShape()
    model.name, model.layers, model.hidden, model.ffn_hidden = "example", 1, Q_HEADS * HEAD_DIM, 4 * Q_HEADS * HEAD_DIM
    model.q_heads, model.kv_heads, model.head_dim, model.dtype_bytes = Q_HEADS, KV_HEADS, HEAD_DIM, 4
    planner = fulcrum.make_planner("distca", fulcrum.PlannerOptions(model, tolerance=0.05, granularity=64))
    batch = fulcrum.pack_batch(fulcrum.documents(LENGTHS), RANKS, TOKENS_PER_RANK)
    assignment = planner.plan(batch)
    if rank == 0:
        report = fulcrum.verify(assignment, batch)
        assert report.ok, report.summary()

    # This rank's own tokens, in segment order: row index of (doc, token) in the local tensors.
    data = full_qkv(batch)
    own = [s for s in batch.segments if s.rank == rank]
    local_row, row = {}, 0
    for s in own:
        local_row[s.doc, s.tokens[0]] = row
        row += s.tokens[1] - s.tokens[0]

    def local_index(doc, lo, hi):
        for s in own:
            if s.doc == doc and s.tokens[0] <= lo and hi <= s.tokens[1]:
                start = local_row[doc, s.tokens[0]] + lo - s.tokens[0]
                return slice(start, start + hi - lo)
        raise RuntimeError(f"rank {rank} does not own doc {doc} [{lo}, {hi})")

    q_local, k_local, v_local = (torch.cat([data[s.doc][i][s.tokens[0] : s.tokens[1]] for s in own]).float()
                                 for i in range(3))
    kv_local = torch.cat([k_local, v_local], dim=1)  # [rows, 2 * kv_heads, dim]: one message for K and V

    tasks, q_pieces, kv_pieces, q_rows, kv_rows = workspace_layout(assignment)
    # Tasks whose query rows live on another rank than their server: the work DistCA moved.
    moved = sum(any(o != t.server for r in t.queries for o, _, _ in pieces_by_owner(batch, t.doc, r))
                for t in assignment.tasks)

    # 1. dispatch Q and K/V to the servers' workspaces.
    wq = torch.zeros(q_rows[rank], Q_HEADS, HEAD_DIM)
    wkv = torch.zeros(kv_rows[rank], 2 * KV_HEADS, HEAD_DIM)
    t0 = time.perf_counter()
    for local, work, pieces in ((q_local, wq, q_pieces), (kv_local, wkv, kv_pieces)):
        width = local.shape[1] * HEAD_DIM
        out = [pieces[rank, dst] for dst in range(world)]
        into = [pieces[src, rank] for src in range(world)]

        def scatter(p, rows, work=work):
            work[p[3] : p[3] + p[2] - p[1]] = rows.view(-1, *work.shape[1:])

        def gather(p, local=local, width=width):
            return local[local_index(*p[:3])].reshape(-1, width)

        exchange(width, out, into, gather, scatter)

    # 2. one fused attention call over every task this rank serves (NumPy views of the workspaces).
    wk, wv = wkv[:, :KV_HEADS].contiguous(), wkv[:, KV_HEADS:].contiguous()
    kernel_tasks = [
        fulcrum.AttentionTask([(r, b, e - b) for r, b, e in spans], (kv_row, task.keys[0], task.keys[1] - task.keys[0]),
                              batch.documents[task.doc].length, "causal")
        for task, spans, kv_row in tasks[rank]
    ]
    wo = torch.zeros_like(wq)
    wlse = torch.full((q_rows[rank], Q_HEADS), -math.inf)
    fulcrum.attention_forward(kernel_tasks, wq.numpy(), wk.numpy(), wv.numpy(), o=wo.numpy(), lse=wlse.numpy())

    # 3. return O and LSE (one row = Q_HEADS * (HEAD_DIM + 1) floats) and merge the parts by LSE.
    wout = torch.cat([wo.reshape(-1, Q_HEADS * HEAD_DIM), wlse], dim=1)
    out_o = torch.zeros_like(q_local)
    out_lse = torch.full((q_local.shape[0], Q_HEADS), -math.inf)
    back_out = [q_pieces[owner, rank] for owner in range(world)]  # what this server computed for each owner
    back_in = [q_pieces[rank, server] for server in range(world)]  # this owner's rows each server computed

    def merge(p, rows):
        index = local_index(*p[:3])
        o_part = rows[:, : Q_HEADS * HEAD_DIM].view(-1, Q_HEADS, HEAD_DIM)
        lse_part = rows[:, Q_HEADS * HEAD_DIM :]
        lse_new = torch.logaddexp(out_lse[index], lse_part)
        w_old = torch.exp(out_lse[index] - lse_new).nan_to_num(0.0).unsqueeze(-1)
        w_new = torch.exp(lse_part - lse_new).nan_to_num(0.0).unsqueeze(-1)
        out_o[index] = out_o[index] * w_old + o_part * w_new
        out_lse[index] = lse_new

    exchange(Q_HEADS * (HEAD_DIM + 1), back_out, back_in, lambda p: wout[p[3] : p[3] + p[2] - p[1]], merge)
    elapsed = time.perf_counter() - t0

    # Plain causal attention in fp64 over whole documents, for this rank's rows.
    worst = 0.0
    for s in own:
        q, k, v = data[s.doc]
        k, v = k.repeat_interleave(Q_HEADS // KV_HEADS, dim=1), v.repeat_interleave(Q_HEADS // KV_HEADS, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(HEAD_DIM)
        n = q.shape[0]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        ref_o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
        ref_lse = torch.logsumexp(scores, dim=-1).T
        index = local_index(s.doc, *s.tokens)
        lo, hi = s.tokens
        worst = max(worst, (out_o[index].double() - ref_o[lo:hi]).abs().max().item(),
                    (out_lse[index].double() - ref_lse[lo:hi]).abs().max().item())
    print(f"rank {rank}: {len(tasks[rank])} tasks served, {q_local.shape[0]} rows owned, "
          f"max |error| vs fp64 {worst:.2e}, exchange+attention {elapsed * 1e3:.1f} ms", flush=True)
    if not worst <= TOLERANCE:
        raise RuntimeError(f"rank {rank}: max |error| {worst:.3e} exceeds the tolerance {TOLERANCE:.0e}")
    if rank == 0 and moved == 0:
        raise RuntimeError("the plan moved no attention work between ranks: the example would test nothing")
    dist.barrier()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    start = time.perf_counter()
    mp.spawn(run_rank, args=(free_port(),), nprocs=RANKS, join=True)
    print(f"torch_distca: {RANKS} ranks matched plain attention (tolerance {TOLERANCE:.0e}) "
          f"in {time.perf_counter() - start:.1f} s")
    sys.exit(0)
