#!/usr/bin/env python3
"""Fulcrum's CPU attention kernels beside PyTorch's CPU scaled_dot_product_attention, in one run.

Both run causal attention on the same shapes (one document, 8 heads, head dim 128, fp32 by default),
forward and backward, on all cores; the table gives each side's median time and GFLOP/s and the
ratio Fulcrum / PyTorch in throughput (> 1: Fulcrum is faster). FLOPs are counted the same way for
both: 4 * head_dim * heads * visible pairs forward, 2.5x that backward.

PyTorch is installed for this comparison only:  pip install torch numpy
Usage: python3 bench/compare_sdpa.py build/release/bin/fulcrum [--lengths 4096,16384,32768] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def torch_times(length, heads, head_dim, dtype, repeats, backward):
    import torch

    torch.manual_seed(0)
    shape = (1, heads, length, head_dim)
    q, k, v = (torch.randn(shape, dtype=dtype, requires_grad=backward) for _ in range(3))
    grad = torch.randn(shape, dtype=dtype)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def forward():
        with torch.no_grad():
            sdpa(q, k, v, is_causal=True)

    def forward_backward():
        out = sdpa(q, k, v, is_causal=True)
        out.backward(grad)

    def median_seconds(fn):
        fn()  # warm-up
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    fwd = median_seconds(forward)
    # PyTorch's backward needs its own forward (autograd saves the softmax statistics there): time the
    # pair and subtract the forward, as the cost of backward alone.
    bwd = median_seconds(forward_backward) - fwd if backward else 0.0
    return fwd, bwd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fulcrum", help="path to the fulcrum binary (release build)")
    parser.add_argument("--lengths", default="4096,16384,32768")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-backward", action="store_true")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("compare_sdpa.py: PyTorch is not installed (pip install torch numpy)")
    torch.set_num_threads(os.cpu_count())
    lengths = [int(x) for x in args.lengths.split(",")]
    backward = not args.no_backward

    rows = []
    for length in lengths:
        # Fulcrum first, then PyTorch, length by length, so both see the same machine state.
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [args.fulcrum, "bench", "kernels", "--lengths", str(length), "--q-heads", str(args.heads),
                   "--kv-heads", str(args.heads), "--head-dim", str(args.head_dim), "--dtype", args.dtype,
                   "--repeats", str(args.repeats), "--split-length", "0", "--json", out.name]
            if not backward:
                cmd.append("--no-backward")
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            ours = {r["pass"]: r for r in json.load(open(out.name))["rows"]}
        dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
        fwd, bwd = torch_times(length, args.heads, args.head_dim, dtype, args.repeats, backward)
        flops = 4.0 * args.head_dim * args.heads * length * (length + 1) / 2
        for name, theirs_s, pass_flops in (("forward", fwd, flops), ("backward", bwd, 2.5 * flops)):
            if name == "backward" and not backward:
                continue
            our = ours[name]
            rows.append({"length": length, "pass": name, "fulcrum_s": our["seconds"], "torch_s": theirs_s,
                         "fulcrum_gflops": pass_flops / our["seconds"] / 1e9,
                         "torch_gflops": pass_flops / theirs_s / 1e9, "ratio": theirs_s / our["seconds"]})

    print(f"causal, {args.heads} heads, head dim {args.head_dim}, {args.dtype}, torch {torch.__version__}, "
          f"{os.cpu_count()} threads, median of {args.repeats}")
    print(f"{'length':>7} {'pass':>9} {'fulcrum s':>10} {'torch s':>9} "
          f"{'fulcrum GF/s':>13} {'torch GF/s':>11} {'ratio':>6}")
    for r in rows:
        print(f"{r['length']:>7} {r['pass']:>9} {r['fulcrum_s']:>10.3f} {r['torch_s']:>9.3f} "
              f"{r['fulcrum_gflops']:>13.1f} {r['torch_gflops']:>11.1f} {r['ratio']:>6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
