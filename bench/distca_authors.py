#!/usr/bin/env python3
"""Per-rank traffic of plans made by the DistCA authors' own scheduler, on Fulcrum's batches.

For each ranks x tolerance x seed, this draws the same `pretrain` batch that `bench/distca_traffic.py`
plans (64K tokens per rank, contiguous packing), hands its document lengths, in order, to the authors'
code (github.com/hao-ai-lab/distca, imported from --authors-dir, not copied) and measures what their
scheduler decides:

1. Placement: `batch_to_items_general` (what their train_3d.py uses) packs the documents onto ranks in
   the same order and with the same token counts per rank as Fulcrum's contiguous packing. Their
   scheduler cannot take a contiguous middle piece of a document (it splits a piece as a mirrored
   head + tail pair), so a document that spans ranks is held as head + tail chunks there instead of
   one contiguous range. Whole documents sit on the same rank as in Fulcrum's batch.
2. Plan: `Planner.plan_items` (the communication-aware greedy scheduler with tolerance factor) moves
   query rows of these items to attention servers. Each chunk it returns computes rows
   [kv - q, kv) of its document against keys [0, kv) (causal) on server `gpuid`.
3. Traffic, counted as Fulcrum's `minimal_transfers` counts it, forward pass of one layer, llama3-8b
   (bf16): Q 8192 bytes a token, K/V 4096, O + LSE 8320. Rows a server does not hold go there as Q
   and come back as O + LSE; the keys a server's rows of a document can see and it does not hold go
   to it once per (server, document) from the ranks that hold them.

It prints, per cell: FLOPs imbalance (max / mean causal pairs per server), traffic imbalance (max / mean
over ranks of bytes sent + received), total bytes (each transfer once), the busiest rank's sent +
received, and whether the plan's rows tile every document exactly once (then every causal (row, key)
pair is computed exactly once, as each chunk sees all keys before its rows).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Q_BYTES, KV_BYTES, OUT_BYTES = 8192, 4096, 8320  # per token: 32 q heads, 8 kv heads (K and V), O + fp32 LSE
LLAMA3_8B = types.SimpleNamespace(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8)


def import_authors(authors_dir: str):
    """The authors' planner module. Its file imports their GPU runtime (CUDA extensions, Megatron) for
    metadata conversion that the scheduler does not use: that package is registered without running its
    __init__, and compute_metadata is replaced by an empty stand-in."""
    sys.path.insert(0, authors_dir)
    runtime = types.ModuleType("distca.runtime")
    runtime.__path__ = [str(Path(authors_dir) / "distca" / "runtime")]
    sys.modules["distca.runtime"] = runtime
    sys.modules["distca.runtime.compute_metadata"] = types.SimpleNamespace(from_planner_output=None)
    from distca.planner import planner
    return planner


def chunks(item):
    """(first row, end row) of each non-empty chunk of an authors' Item: rows [kv - q, kv)."""
    return [(c["kv"] - c["q"], c["kv"]) for c in item.items if c["q"] > 0]


def overlap(a, b):
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def measure(planner, lengths: list[int], ranks: int, tolerance: float) -> dict:
    items = planner.batch_to_items_general([lengths], 65536, ranks, LLAMA3_8B)
    owners = collections.defaultdict(list)  # doc: [(rows, rank)] as their packing holds them
    for item in items:
        for rows in chunks(item):
            owners[item.seqid].append((rows, item.gpuid))
    parallel = types.SimpleNamespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    scheduler = planner.Planner(ranks, parallel, tolerance_factor=tolerance, model_config=LLAMA3_8B)
    start = time.perf_counter()
    planned = scheduler.plan_items(items)
    plan_s = time.perf_counter() - start

    traffic = [0] * ranks  # bytes sent + received
    pairs = [0] * ranks
    total = 0

    def move(src: int, dst: int, size: int) -> None:
        nonlocal total
        traffic[src] += size
        traffic[dst] += size
        total += size

    keys_end = collections.defaultdict(int)  # (server, doc): keys [0, end) its rows see
    tiles = collections.defaultdict(list)
    for item in planned:
        server, doc = item.gpuid, item.seqid
        for rows in chunks(item):
            tiles[doc].append(rows)
            pairs[server] += (rows[1] * (rows[1] + 1) - rows[0] * (rows[0] + 1)) // 2  # row r sees keys [0, r]
            keys_end[server, doc] = max(keys_end[server, doc], rows[1])
            for held, owner in owners[doc]:
                n = overlap(rows, held)
                if n and owner != server:  # Q out, O + LSE back
                    move(owner, server, n * Q_BYTES)
                    move(server, owner, n * OUT_BYTES)
    for (server, doc), end in keys_end.items():
        for held, owner in owners[doc]:
            n = overlap((0, end), held)
            if n and owner != server:
                move(owner, server, n * KV_BYTES)
    # Exact coverage: each document's rows, sorted, run from 0 to its length without gap or overlap.
    exact = all([a for a, _ in sorted(tiles[d])] + [length] == [0] + [b for _, b in sorted(tiles[d])]
                for d, length in enumerate(lengths))
    return {"ranks": ranks, "tolerance": tolerance, "imbalance": max(pairs) * ranks / sum(pairs),
            "traffic_imbalance": max(traffic) * ranks / sum(traffic), "comm_bytes_total": total,
            "busiest_rank_bytes": max(traffic), "exact_coverage": exact, "plan_s": plan_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--authors-dir", required=True, help="a checkout of hao-ai-lab/distca")
    parser.add_argument("--python-dir", default=str(ROOT / "build/release/python"), help="where the fulcrum module is")
    parser.add_argument("--ranks", default="64,128,512")
    parser.add_argument("--tolerances", default="0.1,0.02")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    sys.path.insert(0, args.python_dir)
    import fulcrum
    planner = import_authors(args.authors_dir)
    planner.rich.print = lambda *a, **k: None  # the Planner constructor prints its configuration

    rows = []
    print("ranks  tolerance  seed  imbalance  traffic_imbalance  total_GB  busiest_rank_GB  exact  plan_s")
    for ranks in map(int, args.ranks.split(",")):
        for tolerance in map(float, args.tolerances.split(",")):
            for seed in map(int, args.seeds.split(",")):
                source = fulcrum.make_length_source("pretrain", seed, 65536)
                batch = fulcrum.BatchStream(source, ranks, 65536, boundary_split="contiguous").next()
                row = {"seed": seed, **measure(planner, [d.length for d in batch.documents], ranks, tolerance)}
                rows.append(row)
                print(f"{ranks:5d}  {tolerance:9.2f}  {seed:4d}  {row['imbalance']:9.3f}  "
                      f"{row['traffic_imbalance']:17.2f}  {row['comm_bytes_total'] / 1e9:8.1f}  "
                      f"{row['busiest_rank_bytes'] / 1e9:15.2f}  {row['exact_coverage']!s:5}  "
                      f"{row['plan_s']:6.1f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": "llama3-8b", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
