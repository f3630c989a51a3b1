"""Trains a small Llama-style model on packed synthetic documents, with core attention planned by Fulcrum.

    torchrun --nproc_per_node 2 python/examples/train_llama.py --planner distca --steps 20 [--model plain|hf]
    python3 python/examples/train_llama.py --steps 2          (one process: a 1-rank gloo group)

Data: fulcrum.BatchStream over a length source (``--dataset``, e.g. pretrain) gives each step's packed
batch, filling ranks x tokens-per-rank exactly. A document's token ids come from a generator seeded by
the document's id, so every rank builds the rows it owns without communication. Each step's batch is
planned on fulcrum.PlanAheadLoader's worker thread (planning is deterministic: every rank plans the same
batch and gets the same Assignment) while the previous step trains.

Rows: a rank trains the rows the plan gives it, i.e. the owned rows of the compiled StepPlan, which are
its segments of the *Assignment's* batch (not of the input batch: wlb defers documents, DCP re-lays out
tokens), so every planner runs the same way.

Loss and gradients: the model's parameters are replicated. Each rank sums its rows' next-token losses;
every rank divides by the same global count (labelled rows of the whole batch, known from the plan) and
runs backward, in which the distributed attention returns to each rank the gradient of the *global*
loss w.r.t. its q, k, v. Summing parameter gradients over ranks (all-reduce SUM, not DDP's average) then
gives exactly the gradient of the single-process mean loss over the same batch; the all-reduced loss
sums are what is printed.

Attention: ``make_attention`` is the one place that picks it: ``fulcrum`` (default) runs
fulcrum.torch.attention over the step's compiled plan on the process group; ``reference`` is
single-process attention per document (world size 1 only), the baseline.

The pieces are importable (python/tests/test_torch_training.py and bench/torch_training.py train with them):
``model_config``, ``planner_options``, ``make_model``, ``make_attention`` and ``train_step`` (one optimizer
step over a rank's rows; with ``group_reduce=False`` a process without a group trains the single-process
baseline).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from fulcrum.torch import (
    KernelBackend,
    PackedAttention,
    PackedRows,
    StepPlan,
    check_same_step,
    compile_step,
    planned_attention,
    reference_attention,
)
from llama_model import IGNORE, LlamaConfig, LlamaModel, token_loss_sum

import fulcrum

# Defaults sized for small batches: DistCA's shards and DCP's blocks finer than for 64k-token ranks.
SMALL_BATCH_OPTIONS = {"distca": {"granularity": 64}, "dcp": {"dcp_block": 256}}


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The model's and the optimiser's flags (model_config reads them), shared with bench/torch_training.py."""
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--q-heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--untied", action="store_true", help="an LM head of its own instead of the embedding's")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--planner", default="distca", choices=fulcrum.planner_names())
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a planner option (fulcrum.planner_options(); '-' or '_'), repeatable")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", default="plain", choices=("plain", "hf"),
                   help="plain: python/examples/llama_model.py; hf: transformers' LlamaForCausalLM, "
                        "attn_implementation='fulcrum'")
    p.add_argument("--attention", default="fulcrum", choices=("fulcrum", "reference"),
                   help="fulcrum: fulcrum.torch.attention over the plan; reference: one process, no plan")
    p.add_argument("--dataset", default="pretrain", help="length source: pretrain, prolong, uniform:A:B, ...")
    p.add_argument("--tokens-per-rank", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    add_model_arguments(p)
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0: cores / ranks)")
    p.add_argument("--json", metavar="PATH", help="write the per-step losses and metrics as JSON (rank 0)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.tokens_per_rank < 1:
        p.error("--steps and --tokens-per-rank must be >= 1")
    if args.hidden % args.q_heads or (args.hidden // args.q_heads) % 2:
        p.error(f"--hidden {args.hidden} must be q-heads ({args.q_heads}) x an even head_dim")
    return args


def init_process_group() -> tuple[int, int]:
    """gloo on CPU: torchrun's environment, or a 1-rank group when started as a plain script."""
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # Loopback unless told otherwise: in containers the hostname can resolve to an address gloo cannot use.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    return dist.get_rank(), dist.get_world_size()


def model_shape(c: LlamaConfig) -> fulcrum.ModelShape:
    """The model as Fulcrum's planners and compiler see it (heads, FLOPs, bytes per token)."""
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "train-llama", c.layers, c.hidden, c.ffn_hidden
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = c.q_heads, c.kv_heads, c.head_dim, 4
    return m


def document_tokens(doc_id: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    """A document's token ids, from a generator seeded by (seed, document id): a random motif of 8-64
    Zipf-distributed ids, repeated. Training first learns the ids' frequencies, then to copy from the
    motif's previous repetition, which only attention within the document can do."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + doc_id)
    zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    motif = torch.multinomial(zipf, int(torch.randint(8, 65, (1,), generator=g)), replacement=True, generator=g)
    return motif.repeat(length // len(motif) + 1)[:length]


def rank_inputs(batch: fulcrum.Batch, rows: PackedRows, vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's input ids and labels (the next token in the document; IGNORE at a document's end)."""
    tokens, labels = [torch.empty(0, dtype=torch.int64)], [torch.empty(0, dtype=torch.int64)]  # a rank may own none
    for p in rows.pieces:
        doc = batch.documents[p.doc]
        ids = document_tokens(doc.id, doc.length, vocab, seed)
        tokens.append(ids[p.begin : p.end])
        labels.append(torch.cat([ids[p.begin + 1 : p.end + 1], torch.full((max(0, p.end + 1 - doc.length),), IGNORE)]))
    return torch.cat(tokens), torch.cat(labels)


def labelled_rows(batch: fulcrum.Batch) -> int:
    """Rows with a label over all ranks: every token but each document's last. Every rank computes it."""
    return sum(s.tokens[1] - s.tokens[0] - (s.tokens[1] == batch.documents[s.doc].length) for s in batch.segments)


def attention_flops_per_rank(shape: fulcrum.ModelShape, assignment: fulcrum.Assignment) -> list[float]:
    """Forward attention FLOPs each rank computes under the assignment (by task server)."""
    flops = [0.0] * assignment.batch.ranks
    docs = assignment.batch.documents
    for t in assignment.tasks:
        d = docs[t.doc]
        flops[t.server] += fulcrum.attention_forward_flops(shape, d.mask, t.queries, t.keys, d.length)
    return flops


def packing_flops_per_rank(shape: fulcrum.ModelShape, batch: fulcrum.Batch) -> list[float]:
    """Forward attention FLOPs per rank if each rank computed its own packed rows (no planner)."""
    flops = [0.0] * batch.ranks
    for s in batch.segments:
        d = batch.documents[s.doc]
        flops[s.rank] += fulcrum.attention_forward_flops(shape, d.mask, [s.tokens], (0, d.length), d.length)
    return flops


def imbalance(per_rank: list[float]) -> float:
    mean = sum(per_rank) / len(per_rank)
    return max(per_rank) / mean if mean > 0 else 1.0


def make_attention(kind: str, assignment: fulcrum.Assignment, shape: fulcrum.ModelShape, rank: int,
                   backend: str | KernelBackend = "auto",
                   step: StepPlan | None = None) -> tuple[PackedAttention, PackedRows]:
    """The step's attention and this rank's rows: the one place where the attention implementation is chosen.
    ``backend``: fulcrum.torch.attention's (a name, or a kernel backend object such as a timing wrapper).
    ``step``: the assignment's StepPlan if it was compiled ahead (the loader's ``prepare``), else compiled here."""
    if kind == "reference":
        rows = PackedRows.from_batch(assignment.batch, rank)
        return reference_attention(rows), rows
    if step is None:
        step = compile_step(assignment, shape)  # forward + backward Plans; every rank compiles the same
    check_same_step(step)  # a digest all-gather: a rank planning otherwise would pair the wrong messages
    return planned_attention(step, backend=backend), PackedRows.from_step(step, rank)


class PlainModel:
    def __init__(self, c: LlamaConfig) -> None:
        self.module = LlamaModel(c)

    def logits(self, tokens: torch.Tensor, rows: PackedRows, attention: PackedAttention) -> torch.Tensor:
        return self.module(tokens, rows.positions(), attention)


def hf_config(c: LlamaConfig, max_positions: int, attn_implementation: str) -> object:
    """The same model as transformers' LlamaConfig (random init; nothing is downloaded)."""
    import transformers

    return transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden, intermediate_size=c.ffn_hidden, num_hidden_layers=c.layers,
        num_attention_heads=c.q_heads, num_key_value_heads=c.kv_heads, head_dim=c.head_dim,
        max_position_embeddings=max_positions, rms_norm_eps=c.norm_eps, initializer_range=c.init_std,
        tie_word_embeddings=c.tie_embeddings, rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
        attn_implementation=attn_implementation)


class HFModel:
    """transformers' LlamaForCausalLM with attn_implementation='fulcrum': one packed row of this rank's tokens,
    position_ids restarting per document, attention from the fulcrum.torch.hf context."""

    def __init__(self, c: LlamaConfig, max_positions: int) -> None:
        import fulcrum.torch.hf as fhf
        import transformers

        self.hf = fhf
        self.module = transformers.LlamaForCausalLM(hf_config(c, max_positions, fhf.NAME))

    def logits(self, tokens: torch.Tensor, rows: PackedRows, attention: PackedAttention) -> torch.Tensor:
        with self.hf.attention_context(attention, rows):
            out = self.module(input_ids=tokens[None], position_ids=rows.positions()[None], use_cache=False)
        return out.logits[0]


def all_reduce_gradients(parameters: list[torch.nn.Parameter]) -> torch.Tensor:
    """Sums every parameter's gradient over the ranks, in one flat message, which it returns."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    offset = 0
    for p in parameters:
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()
    return flat


def model_config(args: argparse.Namespace) -> LlamaConfig:
    """The model the command line describes (head_dim = hidden / q_heads; SwiGLU width ~8/3 hidden)."""
    return LlamaConfig(vocab_size=args.vocab, hidden=args.hidden, layers=args.layers, q_heads=args.q_heads,
                       kv_heads=args.kv_heads, head_dim=args.hidden // args.q_heads,
                       ffn_hidden=(8 * args.hidden // 3 + 7) // 8 * 8, tie_embeddings=not args.untied)


def planner_options(planner: str, shape: fulcrum.ModelShape, world: int, seed: int,
                    overrides: dict[str, float] | None = None) -> fulcrum.PlannerOptions:
    """The planner's options: SMALL_BATCH_OPTIONS, then ``overrides`` (names with '-' or '_')."""
    options = fulcrum.PlannerOptions(shape, devices_per_machine=world, seed=seed)
    for name, value in {**SMALL_BATCH_OPTIONS.get(planner, {}), **(overrides or {})}.items():
        options.set(name.replace("_", "-"), value)
    return options


def make_model(kind: str, config: LlamaConfig, max_positions: int, seed: int) -> PlainModel | HFModel:
    """The model with its initial weights drawn from ``seed``: equal on every process that passes the same."""
    torch.manual_seed(seed)
    return HFModel(config, max_positions) if kind == "hf" else PlainModel(config)


@dataclass(frozen=True)
class StepResult:
    loss: float  # the step's mean loss over every labelled row of the batch (all ranks)
    grad_norm: float  # the norm of the summed gradient the optimizer applied
    forward_s: float  # this rank's wall seconds in the model's forward and loss
    backward_s: float  # ... in backward and the gradients' all-reduce


def train_step(model: PlainModel | HFModel, optimizer: torch.optim.Optimizer, attention: PackedAttention,
               rows: PackedRows, batch: fulcrum.Batch, vocab: int, seed: int, *,
               group_reduce: bool = True) -> StepResult | None:
    """One optimizer step over this rank's ``rows`` of ``batch`` (the Assignment's batch); None when the batch
    has no labelled row (wlb may defer every document). Each rank's loss sum is divided by the global count
    of labelled rows, so summing gradients over the ranks (``group_reduce``; False: one process, no group)
    gives the single-process gradient of the mean loss. After it, each parameter's .grad holds that sum."""
    count = labelled_rows(batch)
    if count == 0:  # every rank sees the same plan, so every rank skips
        return None
    parameters = list(model.module.parameters())
    optimizer.zero_grad(set_to_none=True)
    start = time.perf_counter()
    tokens, labels = rank_inputs(batch, rows, vocab, seed)
    loss_sum = token_loss_sum(model.logits(tokens, rows, attention), labels)
    middle = time.perf_counter()
    (loss_sum / count).backward()
    if group_reduce:
        flat = all_reduce_gradients(parameters)
    else:
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in parameters])
    backward_s = time.perf_counter() - middle
    optimizer.step()
    total = loss_sum.detach().reshape(1).clone()
    if group_reduce:
        dist.all_reduce(total)
    loss = total.item() / count
    if not math.isfinite(loss):
        raise RuntimeError(f"loss {loss}")
    return StepResult(loss, torch.linalg.vector_norm(flat).item(), middle - start, backward_s)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world = init_process_group()
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    if args.attention == "reference" and world > 1:
        raise SystemExit("--attention reference runs on one process only (split documents need the plan)")

    config = model_config(args)
    shape = model_shape(config)
    overrides = {}
    for entry in args.option:
        name, _, value = entry.partition("=")
        overrides[name] = float(value)
    options = planner_options(args.planner, shape, world, args.seed, overrides)

    model = make_model(args.model, config, world * args.tokens_per_rank, args.seed)
    parameters = list(model.module.parameters())
    for p in parameters:  # the same seed gave every rank the same weights; the broadcast makes sure
        dist.broadcast(p.data, 0)
    optimizer = torch.optim.AdamW(parameters, lr=args.lr, weight_decay=0.0)

    stream = fulcrum.BatchStream(fulcrum.make_length_source(args.dataset, seed=args.seed,
                                                            tokens_per_rank=args.tokens_per_rank),
                                 world, args.tokens_per_rank)
    planner = fulcrum.make_planner(args.planner, options)
    if rank == 0:
        print(f"train_llama: {world} rank(s), planner {args.planner}, attention {args.attention}, model {args.model}, "
              f"{sum(p.numel() for p in parameters)} parameters, {args.tokens_per_rank} tokens per rank", flush=True)
    records = []
    batches = itertools.islice(stream, args.steps)
    # Planning runs on the loader's worker thread, ahead of the step. Compiling stays here: with
    # prepare=compile_step on the worker, torchrun ranks aborted at exit ("terminate called without an active
    # exception") in 2 of 4 runs, against 0 of 4 without; not understood yet.
    with fulcrum.PlanAheadLoader(batches, planner, ranks=world, tokens_per_rank=args.tokens_per_rank) as loader:
        for planned in loader:
            start = time.perf_counter()
            assignment = planned.assignment
            attention, rows = make_attention(args.attention, assignment, shape, rank)
            result = train_step(model, optimizer, attention, rows, assignment.batch, args.vocab, args.seed)
            if result is None:
                if rank == 0:
                    print(f"step {planned.index:3d}  the plan trains no tokens ({args.planner} deferred them)")
                continue
            elapsed = time.perf_counter() - start
            trained_tokens = assignment.batch.total_tokens()
            record = {"step": planned.index, "loss": result.loss, "tokens": trained_tokens,
                      "tokens_per_s": trained_tokens / elapsed, "grad_norm": result.grad_norm,
                      "forward_s": result.forward_s, "backward_s": result.backward_s, "plan_s": planned.plan_s,
                      "imbalance_plan": imbalance(attention_flops_per_rank(shape, assignment)),
                      "imbalance_packing": imbalance(packing_flops_per_rank(shape, planned.batch))}
            records.append(record)
            if rank == 0:
                print(f"step {record['step']:3d}  loss {result.loss:.4f}  {record['tokens_per_s']:8.0f} tokens/s  "
                      f"attention imbalance (max/mean FLOPs) plan {record['imbalance_plan']:.2f} vs packing "
                      f"{record['imbalance_packing']:.2f}  planned in {planned.plan_s * 1e3:.1f} ms", flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"world": world, "planner": args.planner, "attention": args.attention, "model": args.model,
                       "steps": records}, f, indent=1)
    # Every rank past its last step before any tears its gloo group down: under load, a rank that exited while
    # its peer was still finishing aborted once in 38 two-rank runs ("terminate called without an active
    # exception", after both ranks' last step; cause in gloo's teardown not pinned down).
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
