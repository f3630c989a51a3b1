#!/usr/bin/env python3
"""Per-rank traffic of DistCA plans on natural `pretrain` batches (issue 20's acceptance grid).

For each ranks x tolerance x seed, `fulcrum plan --planners distca` plans one batch of 64K tokens per rank
(llama3-8b, causal) and this prints the packing's FLOPs imbalance, DistCA's, its traffic imbalance (max /
mean over ranks of bytes sent + received), total bytes, the busiest rank's bytes and planning time, as a
table and (--json) a file.

--explain RANKS:SEED lists that batch's busiest ranks at tolerance 0.1, planned with the --option values:
what they send and receive, to how many ranks, the document pieces they hold and the tasks with the most
rows they compute (through the Python module, bytes per token from fulcrum.token_bytes).

--relay-estimate prints, for the same grid, the traffic imbalance each plan would have if servers forwarded
the K/V they received to other servers (relay_imbalance), beside the plan's own.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KV = 1  # TensorKind of K/V transfers


def plan_row(fulcrum: str, ranks: int, tolerance: float, seed: int, model: str, out: Path,
             options: list[str]) -> dict:
    subprocess.run([fulcrum, "plan", *options, "--planners", "distca", "--ranks", str(ranks),
                    "--tokens-per-rank", "65536", "--dataset", "pretrain", "--model", model,
                    "--seed", str(seed), "--tolerance", str(tolerance), "--json", str(out), "-q"],
                   check=True, capture_output=True, text=True)
    report = json.loads(out.read_text())
    p = report["planners"]["distca"]
    return {"ranks": ranks, "tolerance": tolerance, "seed": seed, "packed_imbalance": report["packed_imbalance"],
            "imbalance": p["imbalance"],
            "traffic_imbalance": p["traffic_imbalance"], "comm_bytes_total": p["comm_bytes_total"],
            "comm_bytes_max_rank": p["comm_bytes_max_rank"], "plan_ms": p["plan_ms"], "valid": p["valid"]}


def python_plan(python_dir: str, ranks: int, seed: int, tolerance: float, model_name: str,
                options: list[str]) -> tuple:
    """The table's plan, made through the Python module: (batch, plan, bytes per token by TensorKind)."""
    sys.path.insert(0, python_dir)
    import fulcrum  # the build's module, found through --python-dir

    model = fulcrum.model_shape(model_name)
    planner_options = fulcrum.PlannerOptions(model, tolerance=tolerance)
    split = "contiguous"
    for key, value in (kv.split("=", 1) for kv in options):
        if key == "boundary-split":
            split = value
        else:
            planner_options.set(key, float(value))
    source = fulcrum.make_length_source("pretrain", seed, 65536)
    batch = fulcrum.BatchStream(source, ranks, 65536, boundary_split=split).next()
    plan = fulcrum.make_planner("distca", planner_options).plan(batch)
    bytes_of = fulcrum.token_bytes(model)
    per_token = {0: bytes_of.q, KV: bytes_of.kv, 2: bytes_of.output()}  # by TensorKind: Q, K/V, O and LSE
    return batch, plan, per_token


def transfer_bytes(transfer, per_token: dict[int, int]) -> int:
    return per_token[int(transfer.kind)] * (transfer.tokens[1] - transfer.tokens[0])


def relay_imbalance(plan, per_token: dict[int, int], ranks: int, max_hops: int) -> float:
    """Traffic imbalance if every owner's K/V went to its servers through a relay: a server that already
    holds a superset of another's keys may forward them, and of the holders within `max_hops` of the owner
    the one with the least traffic so far sends (groups largest first, each server's keys largest first).
    max_hops 1 is the plan as it is (only owners send).
    Total bytes are unchanged; only who sends moves. An estimate of what a relay phase could buy, not a plan."""
    traffic: collections.Counter[int] = collections.Counter()
    groups: dict[tuple[int, int], list] = collections.defaultdict(list)
    for t in plan.transfers:
        if int(t.kind) == KV:
            groups[(t.src, t.doc)].append(t)
        else:
            traffic[t.src] += transfer_bytes(t, per_token)
            traffic[t.dst] += transfer_bytes(t, per_token)
    for (owner, _), sends in sorted(groups.items(), key=lambda g: -sum(t.tokens[1] - t.tokens[0] for t in g[1])):
        holders = [(owner, (0, 1 << 62), 0)]  # rank, keys held, hops from the owner
        for t in sorted(sends, key=lambda t: -(t.tokens[1] - t.tokens[0])):
            size = transfer_bytes(t, per_token)
            able = [h for h in holders if h[1][0] <= t.tokens[0] and t.tokens[1] <= h[1][1] and h[2] < max_hops]
            sender = min(able, key=lambda h: traffic[h[0]])
            traffic[sender[0]] += size
            traffic[t.dst] += size
            holders.append((t.dst, t.tokens, sender[2] + 1))
    totals = [traffic[r] for r in range(ranks)]
    return max(totals) / statistics.fmean(totals)


def explain(python_dir: str, ranks: int, seed: int, model_name: str, top: int, options: list[str]) -> None:
    # The same plan as the table's row at tolerance 0.1: --option values apply here too.
    batch, plan, per_token = python_plan(python_dir, ranks, seed, 0.1, model_name, options)
    sent: collections.Counter[int] = collections.Counter()
    received: collections.Counter[int] = collections.Counter()
    kv_sent: collections.Counter[int] = collections.Counter()
    fan_out: dict[int, set[int]] = collections.defaultdict(set)
    for t in plan.transfers:
        size = transfer_bytes(t, per_token)
        sent[t.src] += size
        received[t.dst] += size
        fan_out[t.src].add(t.dst)
        if int(t.kind) == KV:
            kv_sent[t.src] += size
    pieces: dict[int, list[str]] = collections.defaultdict(list)
    for s in batch.segments:
        pieces[s.rank].append(f"doc {s.doc} [{s.tokens[0]}, {s.tokens[1]}) of {batch.documents[s.doc].length}")
    computes: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)  # rank: (rows, task), by task
    for t in plan.tasks:
        rows = " + ".join(f"[{q[0]}, {q[1]})" for q in t.queries)
        size = sum(q[1] - q[0] for q in t.queries)
        computes[t.server].append((size, f"doc {t.doc} rows {rows} keys [{t.keys[0]}, {t.keys[1]})"))
    total = {r: sent[r] + received[r] for r in range(ranks)}
    mean = statistics.fmean(total.values())
    print(f"\n{ranks} ranks, seed {seed}: mean sent + received {mean / 1e9:.2f} GB per rank")
    for r in sorted(total, key=lambda r: -total[r])[:top]:
        held = "; ".join(pieces[r][:3]) + (f"; ... ({len(pieces[r])} pieces)" if len(pieces[r]) > 3 else "")
        print(f"rank {r}: {total[r] / 1e9:.2f} GB ({total[r] / mean:.2f}x mean), sent {sent[r] / 1e9:.2f} "
              f"(K/V {kv_sent[r] / 1e9:.2f}) to {len(fan_out[r])} ranks, received {received[r] / 1e9:.2f}; "
              f"holds {held}")
        largest = [text for _, text in sorted(computes[r], reverse=True)[:3]]  # the most rows first
        more = f"; ... ({len(computes[r])} tasks)" if len(computes[r]) > 3 else ""
        print(f"  computes {'; '.join(largest)}{more}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fulcrum", default=str(ROOT / "build/release/bin/fulcrum"))
    parser.add_argument("--python-dir", default=str(ROOT / "build/dev/python"), help="where the fulcrum module is")
    parser.add_argument("--ranks", default="64,128,512")
    parser.add_argument("--tolerances", default="0.1,0.02")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--model", default="llama3-8b")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a `fulcrum plan` option for every plan (repeatable): overshoot=0, "
                        "boundary-split=head-tail")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--explain", help="RANKS:SEED: list that batch's busiest ranks")
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--relay-estimate", action="store_true",
                        help="instead of the table: each plan's traffic imbalance as planned, and as it would be "
                        "with K/V relayed by servers (at most 2 hops, and any number; relay_imbalance)")
    args = parser.parse_args()

    grid = [(int(r), float(t), int(s)) for r in args.ranks.split(",") for t in args.tolerances.split(",")
            for s in args.seeds.split(",")]
    if args.relay_estimate:
        print("ranks  tolerance  seed  planned  relay_2_hops  relay_any")
        for ranks, tolerance, seed in grid:
            _, plan, per_token = python_plan(args.python_dir, ranks, seed, tolerance, args.model, args.option)
            estimates = [relay_imbalance(plan, per_token, ranks, hops) for hops in (1, 2, ranks)]
            print(f"{ranks:5d}  {tolerance:9.2f}  {seed:4d}  " + "  ".join(f"{e:7.2f}" for e in estimates), flush=True)
        return
    options = [arg for kv in args.option for arg in ("--" + kv.split("=", 1)[0], kv.split("=", 1)[1])]
    rows = []
    print("ranks  tolerance  seed  packed_imbalance  imbalance  traffic_imbalance  comm_bytes_total  "
          "comm_bytes_max_rank  plan_ms  valid")
    with tempfile.TemporaryDirectory() as tmp:
        for ranks, tolerance, seed in grid:
            row = plan_row(args.fulcrum, ranks, tolerance, seed, args.model, Path(tmp) / "plan.json", options)
            rows.append(row)
            print(f"{ranks:5d}  {tolerance:9.2f}  {seed:4d}  {row['packed_imbalance']:16.3f}  "
                  f"{row['imbalance']:9.3f}  "
                  f"{row['traffic_imbalance']:17.2f}  {row['comm_bytes_total'] / 1e9:13.1f} GB  "
                  f"{row['comm_bytes_max_rank'] / 1e9:16.2f} GB  {row['plan_ms']:7.1f}  {row['valid']}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"schema_version": 1, "model": args.model, "options": args.option, "rows": rows}, indent=1))
    if args.explain:
        ranks, seed = (int(x) for x in args.explain.split(":"))
        explain(args.python_dir, ranks, seed, args.model, args.top, args.option)


if __name__ == "__main__":
    main()
