#!/usr/bin/env python3
"""auto against every fixed strategy over the issue-20 sweep: docs/experiments.md, "`auto`: the strategy chosen
per iteration".

Runs `fulcrum simulate` (llama3-8b on h200-dgx, tp 8, its default 16 iterations) with auto and every fixed planner
over both datasets, four masks and 64-512 GPUs, one process per (GPUs, dataset) cell, `--jobs` at a time; DCP's
block is 2048 tokens up to 256 GPUs and 4096 at 512 (it plans at most 131,072 computation blocks). Writes every
planner's tokens/s and auto's choices per point as JSON, and prints the markdown table of experiments.md:

    python3 bench/auto_sweep.py build/release/bin/fulcrum --json docs/figures/distca/auto_sweep.json --jobs 2
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PLANNERS = ["auto", "distca", "dcp", "packed", "perdoc-cp", "wlb", "ring", "zigzag"]
DATASETS = ["pretrain", "prolong"]
MASKS = ["causal", "lambda:64:4096", "blockwise:256:2", "shared-question:4:20"]
GPUS = [64, 128, 256, 512]


def dcp_block(gpus: int) -> int:
    return 4096 if gpus >= 512 else 2048


def run_cell(fulcrum: str, gpus: int, dataset: str, out_dir: Path, extra: list[str]) -> list[dict[str, Any]]:
    out = out_dir / f"auto_{gpus}_{dataset}.json"
    command = [fulcrum, "simulate", "--planners", ",".join(PLANNERS), "--gpus", str(gpus), "--dataset", dataset,
               "--sweep", "mask=" + ",".join(MASKS), "--dcp-block", str(dcp_block(gpus)), "--json", str(out), *extra]
    print("running:", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    return rows


def point(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One point's record: every planner's tokens/s, and auto's choices and costs summed over the run."""
    by_planner = {r["planner"]: r for r in rows}
    a = by_planner["auto"]
    choice = a["auto"]
    planning = dict(zip(choice["candidates"], choice["candidate_planning_s"], strict=True))
    return {"gpus": a["gpus"], "dataset": a["dataset"], "mask": a["mask"],
            "tokens_per_s": {name: by_planner[name]["tokens_per_s"] for name in PLANNERS},
            "auto": {"chosen": dict(collections.Counter(choice["chosen"]).most_common()),
                     "runner_up": dict(collections.Counter(x for x in choice["runner_up"] if x).most_common()),
                     "planning_s": choice["planning_s"], "candidate_planning_s": planning,
                     "chosen_planning_s": choice["chosen_planning_s"], "simulating_s": choice["simulating_s"],
                     "iterations": len(choice["chosen"]), "computed_work_share": a["computed_work_share"],
                     "mean_iteration_s": a["mean_iteration_s"]}}


def table(points: list[dict[str, Any]]) -> str:
    lines = ["| GPUs | dataset | mask | best fixed | best fixed / auto | auto / distca | auto chose | "
             "planning s: others + dcp | simulating s | chosen plans s | iteration s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        tps = p["tokens_per_s"]
        fixed = {name: v for name, v in tps.items() if name != "auto"}
        best = max(fixed, key=lambda name: fixed[name])
        a = p["auto"]
        n = a["iterations"]
        dcp = a["candidate_planning_s"].get("dcp", 0.0)
        chose = ", ".join(f"{name} {count}" for name, count in a["chosen"].items())
        lines.append(f"| {p['gpus']} | {p['dataset']} | {p['mask']} | {best} | {fixed[best] / tps['auto']:.3f} | "
                     f"{tps['auto'] / tps['distca']:.3f} | {chose} | {(a['planning_s'] - dcp) / n:.3f} + "
                     f"{dcp / n:.3f} | {a['simulating_s'] / n:.3f} | {a['chosen_planning_s'] / n:.4f} | "
                     f"{a['mean_iteration_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fulcrum", help="the fulcrum binary (a release build)")
    parser.add_argument("--json", help="write the points here")
    parser.add_argument("--jobs", type=int, default=2, help="simulate processes at a time")
    parser.add_argument("--gpus", default=",".join(map(str, GPUS)), help="comma-separated GPU counts")
    parser.add_argument("--extra", default="", help="more simulate flags, space-separated")
    parser.add_argument("--raw", help="keep each cell's simulate JSON in this folder (default: a temporary one)")
    args = parser.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]
    cells = [(g, d) for g in gpus for d in DATASETS]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=args.jobs) as pool:
        raw = Path(args.raw or tmp)
        raw.mkdir(parents=True, exist_ok=True)
        # The largest cells first, so the pool ends together.
        futures = {cell: pool.submit(run_cell, args.fulcrum, *cell, raw, args.extra.split())
                   for cell in sorted(cells, key=lambda c: -c[0])}
        rows = {cell: futures[cell].result() for cell in cells}
    points = []
    for cell in cells:
        by_mask = collections.defaultdict(list)
        for r in rows[cell]:
            by_mask[r["mask"]].append(r)
        points.extend(point(by_mask[m]) for m in MASKS)
    if args.json:
        description = ("fulcrum simulate, llama3-8b on h200-dgx, tp 8, 16 iterations: tokens/s of auto and every fixed "
                       "planner per point, and auto's choices and planning seconds (summed over the run); dcp-block "
                       "2048 up to 256 GPUs, 4096 at 512 (bench/auto_sweep.py)")
        Path(args.json).write_text(json.dumps({"description": description, "points": points}, indent=1) + "\n")
    print(table(points))


if __name__ == "__main__":
    main()
