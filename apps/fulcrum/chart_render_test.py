#!/usr/bin/env python3
"""Every chart the CLI writes, rendered: `chart_render_test.py PATH_TO_FULCRUM REPO_ROOT`.

Writes each kind of chart with small sizes (`demo` and `run`: attention per rank; `simulate`: speedup and
breakdown, for one point, a few, and enough points with several sweep keys to become small multiples)
and checks each with scripts/svg_label_check.py: rsvg-convert renders it, every label lies inside the
canvas, no two labels overlap, every group is labelled, nothing is drawn at the canvas's edge.
"""
import os
import subprocess
import sys
import tempfile

FULCRUM, ROOT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import svg_label_check  # noqa: E402

SMALL_RUN = ["--dataset", "uniform:16:300", "--tokens-per-rank", "128", "--granularity", "16"]
SIMULATE = ["--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--max-doc-len", "16384", "--tokens-per-rank", "16384"]
failures = []


def run(*args):
    result = subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        failures.append(f"fulcrum {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}")
    return result.returncode == 0


with tempfile.TemporaryDirectory() as tmp:
    charts = []
    if run("demo", *SMALL_RUN, "--out", os.path.join(tmp, "demo")):
        charts.append(os.path.join(tmp, "demo", "attention_per_rank.svg"))
    path = os.path.join(tmp, "run.svg")
    if run("run", "--ranks", "2", *SMALL_RUN, "--planners", "distca,packed", "--modes", "pingpong,signal",
           "--svg", path):
        charts.append(path)
    studies = {
        "one-point": ["--planners", "distca,wlb"],
        "modes": ["--planners", "distca,wlb,packed,perdoc-cp", "--modes", "pingpong,signal", "--sweep", "pp=1,2"],
        "one-key": ["--planners", "distca", "--sweep", "tolerance=0,0.02,0.05,0.1,0.2,0.4"],
        "facets": ["--planners", "distca,wlb", "--pp", "1", "--sweep", "gpus=16,32,64",
                   "--sweep", "max-doc-len=8192,16384,32768", "--sweep", "dataset=pretrain,prolong"],
    }
    for name, args in studies.items():
        path = os.path.join(tmp, f"{name}.svg")
        if run("simulate", *SIMULATE, *args, "--svg", path):
            charts += [path, path[: -len(".svg")] + "-breakdown.svg"]
    # Small multiples: the facetted study draws one panel per gpus value.
    facets = os.path.join(tmp, "facets.svg")
    if os.path.exists(facets):
        panels = open(facets).read().count('class="panel-title"')
        if panels != 3:
            failures.append(f"the 18-point study drew {panels} panel titles, expected 3 (one per gpus value)")
    if len(charts) != 2 + 2 * len(studies):
        failures.append(f"{len(charts)} charts written, expected {2 + 2 * len(studies)}")
    for chart in charts:
        failures += svg_label_check.check_chart(chart)

for failure in failures:
    print(failure)
print(f"chart_render_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
