#!/usr/bin/env python3
"""Per-rank traffic of DistCA plans on natural `pretrain` batches (issue 20's acceptance grid).

For each ranks x tolerance x seed, `fulcrum plan --planners distca` plans one batch of 64K tokens per rank
(llama3-8b, causal) and this prints the packing's FLOPs imbalance, DistCA's, its traffic imbalance (max /
mean over ranks of bytes sent + received), total bytes, the busiest rank's bytes and planning time, as a
table and (--json) a file.

--explain RANKS:SEED lists that batch's busiest ranks at tolerance 0.1, planned with the --option values:
what they send and receive, to how many ranks, and the document pieces they hold (through the Python
module, bytes per token from fulcrum.token_bytes).
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


def explain(python_dir: str, ranks: int, seed: int, model_name: str, top: int, options: list[str]) -> None:
    sys.path.insert(0, python_dir)
    import fulcrum  # the build's module, found through --python-dir

    # The same plan as the table's row at tolerance 0.1: --option values apply here too.
    model = fulcrum.model_shape(model_name)
    planner_options = fulcrum.PlannerOptions(model, tolerance=0.1)
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
    per_token = {0: bytes_of.q, 1: bytes_of.kv, 2: bytes_of.output()}  # by TensorKind: Q, K/V, O and LSE
    sent: collections.Counter[int] = collections.Counter()
    received: collections.Counter[int] = collections.Counter()
    kv_sent: collections.Counter[int] = collections.Counter()
    fan_out: dict[int, set[int]] = collections.defaultdict(set)
    for t in plan.transfers:
        size = per_token[int(t.kind)] * (t.tokens[1] - t.tokens[0])
        sent[t.src] += size
        received[t.dst] += size
        fan_out[t.src].add(t.dst)
        if int(t.kind) == 1:
            kv_sent[t.src] += size
    pieces: dict[int, list[str]] = collections.defaultdict(list)
    for s in batch.segments:
        pieces[s.rank].append(f"doc {s.doc} [{s.tokens[0]}, {s.tokens[1]}) of {batch.documents[s.doc].length}")
    total = {r: sent[r] + received[r] for r in range(ranks)}
    mean = statistics.fmean(total.values())
    print(f"\n{ranks} ranks, seed {seed}: mean sent + received {mean / 1e9:.2f} GB per rank")
    for r in sorted(total, key=lambda r: -total[r])[:top]:
        held = "; ".join(pieces[r][:3]) + (f"; ... ({len(pieces[r])} pieces)" if len(pieces[r]) > 3 else "")
        print(f"rank {r}: {total[r] / 1e9:.2f} GB ({total[r] / mean:.2f}x mean), sent {sent[r] / 1e9:.2f} "
              f"(K/V {kv_sent[r] / 1e9:.2f}) to {len(fan_out[r])} ranks, received {received[r] / 1e9:.2f}; "
              f"holds {held}")


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
    args = parser.parse_args()

    options = [arg for kv in args.option for arg in ("--" + kv.split("=", 1)[0], kv.split("=", 1)[1])]
    rows = []
    print("ranks  tolerance  seed  packed_imbalance  imbalance  traffic_imbalance  comm_bytes_total  "
          "comm_bytes_max_rank  plan_ms  valid")
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (int(x) for x in args.ranks.split(",")):
            for tolerance in (float(x) for x in args.tolerances.split(",")):
                for seed in (int(x) for x in args.seeds.split(",")):
                    row = plan_row(args.fulcrum, ranks, tolerance, seed, args.model, Path(tmp) / "plan.json",
                                   options)
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
