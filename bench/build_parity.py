#!/usr/bin/env python3
"""The kernels' speed from different builds of Fulcrum, measured side by side in one run.

Each build is a `fulcrum` binary (timed by `fulcrum bench kernels`) or a Python interpreter with the
`fulcrum` module installed (timed here through fulcrum.attention_forward / attention_backward on the same
problem: one causal document, fp32, the CLI's default heads and head dimension). Rounds alternate the
builds, so a neighbour's load lands on all of them; the table gives each build's median seconds, the
GFLOP/s they make with the first CLI build's FLOP count, the ISA version that ran, and the ratio to the
first build. One build carries every ISA version and picks one at run time (core/simd.hpp), so builds
that differ only in flags and packaging should agree.

  python3 bench/build_parity.py --cli plain=build/plain/bin/fulcrum --cli release=build/release/bin/fulcrum \\
      --python pip=/tmp/venv/bin/python --lengths 4096 --rounds 3 --json parity.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HEADS, HEAD_DIM = 8, 128

# Run by each Python build: times one causal document's forward and backward, prints JSON.
PYTHON_TIMER = r"""
import json, sys, time
import numpy as np
import fulcrum
length, repeats = int(sys.argv[1]), int(sys.argv[2])
heads, dim = int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
q, k, v, d_o = (rng.standard_normal((length, heads, dim), dtype=np.float32) for _ in range(4))
tasks = [fulcrum.AttentionTask([(0, 0, length)], (0, 0, length), length, "causal")]
def median_seconds(run):
    run()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]
o, lse = fulcrum.attention_forward(tasks, q, k, v)
forward = median_seconds(lambda: fulcrum.attention_forward(tasks, q, k, v, o=o, lse=lse))
backward = median_seconds(lambda: fulcrum.attention_backward(tasks, q, k, v, o, lse, d_o))
print(json.dumps({"forward": forward, "backward": backward, "simd_path": fulcrum.simd_path()}))
"""


def named(text):
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"'{text}': expected NAME=PATH")
    return name, path


def time_cli(path, length, repeats):
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "bench.json")
        subprocess.run([path, "bench", "kernels", "--lengths", str(length), "--split-length", "0", "--repeats",
                        str(repeats), "--q-heads", str(HEADS), "--kv-heads", str(HEADS), "--head-dim", str(HEAD_DIM),
                        "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as f:
            result = json.load(f)
    rows = {r["pass"]: r for r in result["rows"]}
    return {p: rows[p]["seconds"] for p in ("forward", "backward")}, {p: rows[p]["flops"] for p in rows}, \
        result["simd_path"]


def time_python(python, length, repeats):
    out = subprocess.run([python, "-c", PYTHON_TIMER, str(length), str(repeats), str(HEADS), str(HEAD_DIM)],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    result = json.loads(out.stdout)
    return {p: result[p] for p in ("forward", "backward")}, result["simd_path"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", type=named, action="append", default=[], help="NAME=path of a fulcrum binary")
    parser.add_argument("--python", type=named, action="append", default=[],
                        help="NAME=path of a Python interpreter with fulcrum installed")
    parser.add_argument("--lengths", default="4096", help="document lengths, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats inside each measurement")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if not args.cli:
        parser.error("--cli: at least one fulcrum binary (its FLOP count converts every build's seconds)")
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats must be >= 1")
    lengths = [int(x) for x in args.lengths.split(",")]
    builds = [("cli", n, p) for n, p in args.cli] + [("python", n, p) for n, p in args.python]

    results = []
    for length in lengths:
        seconds = {name: {"forward": [], "backward": []} for _, name, _ in builds}
        paths, flops = {}, None
        for _ in range(args.rounds):
            for kind, name, path in builds:
                if kind == "cli":
                    s, f, simd = time_cli(path, length, args.repeats)
                    flops = flops or f
                else:
                    s, simd = time_python(path, length, args.repeats)
                paths[name] = simd
                for p in s:
                    seconds[name][p].append(s[p])
        first = builds[0][1]
        for p in ("forward", "backward"):
            base = statistics.median(seconds[first][p])
            for _, name, _ in builds:
                median = statistics.median(seconds[name][p])
                results.append({"length": length, "pass": p, "build": name, "seconds": median,
                                "gflops": flops[p] / median / 1e9, "ratio_to_first": base / median,
                                "simd_path": paths[name], "samples": seconds[name][p]})

    print(f"{'length':>7} {'pass':9} {'build':10} {'seconds':>8} {'GFLOP/s':>8} {'vs first':>8}  simd")
    for r in results:
        print(f"{r['length']:>7} {r['pass']:9} {r['build']:10} {r['seconds']:8.3f} {r['gflops']:8.1f} "
              f"{r['ratio_to_first']:8.2f}  {r['simd_path']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"heads": HEADS, "head_dim": HEAD_DIM, "rounds": args.rounds, "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
