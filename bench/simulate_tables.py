#!/usr/bin/env python3
"""Markdown tables for docs/experiments.md from the CSVs bench/simulate_experiments.sh writes.

    python3 bench/simulate_tables.py [DIR [STUDY]]      (DIR: docs/figures; STUDY: only that one)
"""
import csv
import os
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "docs/figures"


def rows(name):
    with open(os.path.join(root, f"sim-{name}.csv")) as f:
        return list(csv.DictReader(f))


def label(row):
    return row["planner"] + ("/" + row["mode"] if row["planner"] in ("distca", "dcp") else "")


def speedup_table(name, reference):
    data = rows(name)
    points = sorted({r["point"] for r in data}, key=lambda p: [int(v) if v.isdigit() else v
                                                                for v in (kv.split("=")[1] for kv in p.split())])
    planners = [s for s in dict.fromkeys(label(r) for r in data) if s != reference]
    print(f"| point | {reference} layout | " + " | ".join(f"{s} speedup" for s in planners) + " |")
    print("|---|---|" + "---|" * len(planners))
    speedups = {s: [] for s in planners}
    for p in points:
        at = {label(r): r for r in data if r["point"] == p}
        ref = at[reference]
        layout = f"cp{ref['cp']} pp{ref['pp']}" + (" OOM" if ref["out_of_memory"] == "true" else "")
        cells = []
        for s in planners:
            r = at[s]
            if r["speedup"]:  # empty where the row or the reference does not fit in memory
                speedups[s].append(float(r["speedup"]))
                cells.append(f"{float(r['speedup']):.2f}")
            else:
                cells.append("OOM" if r["out_of_memory"] == "true" else "ref OOM")
        print(f"| {p} | {layout} | " + " | ".join(cells) + " |")
    for s in planners:
        v = speedups[s]
        if v:
            print(f"\n{s} over {reference}: median {statistics.median(v):.2f}x, range {min(v):.2f}-{max(v):.2f}x "
                  f"over the {len(v)} of {len(points)} points where both fit in memory")
        else:
            print(f"\n{s} over {reference}: no point where both fit in memory")


def breakdown_table(name, extra=()):
    data = rows(name)
    cols = ["mean_iteration_s", "linear_s", "attention_s", "exposed_comm_s", "idle_s", "dp_sync_s", *extra]
    print("| point | system | " + " | ".join(cols) + " | exposed % | idle % |")
    print("|---|---|" + "---|" * (len(cols) + 2))
    for r in data:
        cells = []
        for c in cols:
            v = float(r[c])
            cells.append(f"{v / 1e12:.2f} TB" if c == "attention_bytes" else
                         f"{v / 2**30:.1f} GiB" if c == "memory_bytes" else f"{v:.3f}")
        shares = [f"{100 * float(r[c]) / float(r['mean_iteration_s']):.1f}" for c in ("exposed_comm_s", "idle_s")]
        print(f"| {r['point']} | {label(r)} | " + " | ".join(cells + shares) + " |")


if __name__ == "__main__":
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for name, ref in (("nopp-8b", "wlb"), ("nopp-34b", "wlb"), ("pp-34b", "wlb")):
        if os.path.exists(os.path.join(root, f"sim-{name}.csv")) and only in (None, name):
            print(f"\n#### {name}\n")
            speedup_table(name, ref)
    for name, extra in (("ablation", ("attention_bytes",)), ("tolerance", ("attention_bytes", "attention_imbalance")),
                        ("cp-growth", ("attention_bytes", "memory_bytes")), ("dp-growth", ("attention_imbalance",))):
        if os.path.exists(os.path.join(root, f"sim-{name}.csv")) and only in (None, name):
            print(f"\n#### {name}\n")
            breakdown_table(name, extra)
