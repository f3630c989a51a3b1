#!/usr/bin/env python3
"""The CLI at its supported limits, run by ctest: `limits_cli_test.py PATH_TO_FULCRUM`.

Input beyond a limit (docs/cli.md, "Supported limits") or beyond an integer option's type exits 2 with one
stderr line naming the field, where it once crashed, wrapped or was clamped; input at a limit gives the
exact answer.
"""
import json
import os
import subprocess
import sys
import tempfile

FULCRUM = sys.argv[1]
failures = []


def run(*args):
    # Bounded: before the limits, some of these cases ran on for minutes (65,537 simulated GPUs).
    try:
        return subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -1, "", "timed out after 120 s")


def check(condition, message):
    if not condition:
        failures.append(message)


SIMULATE = ["simulate", "--gpus", "8", "--max-doc-len", "16384"]
PLAN = ["plan", "--planners", "packed"]

with tempfile.TemporaryDirectory() as tmp:
    def lengths_file(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return "file:" + path

    bad_inputs = [
        # tp x pp wrapped to 0 in an int and divided by it (SIGFPE), with and without --search; tp = 0 divided too.
        ([*SIMULATE, "--planners", "packed", "--pp", "536870912"], "pp = 536870912: tp x pp = 4294967296"),
        ([*SIMULATE, "--planners", "packed", "--pp", "536870912", "--search"], "pp = 536870912"),
        ([*SIMULATE, "--planners", "wlb", "--tp", "0"], "tp = 0"),
        ([*SIMULATE, "--planners", "packed", "--dp", "2147483647", "--pp", "2147483647"], "dp = 2147483647"),
        (["simulate", "--gpus", "65537", "--tp", "1", "--planners", "packed"], "gpus = 65537: must be in [1, 65536]"),
        # A 2^32-token document's pairs overflowed: imbalance 7516192769, "valid".
        ([*PLAN, "--ranks", "4", "--tokens-per-rank", "1073741824",
          "--dataset", lengths_file("big.txt", "4294967296\n")], "length #1 = 4294967296: must be <= 1073741824"),
        ([*PLAN, "--dataset", lengths_file("big.json", "[100, 1073741825]")], "lengths[1] = 1073741825"),
        ([*PLAN, "--dataset", lengths_file("floats.json", "[1.5, 2.7, 100]")], "lengths[0] = 1.5: must be an integer"),
        ([*PLAN, "--dataset", lengths_file("huge.json", "[1e30]")], "lengths[0] = 1e+30: must be an integer"),
        ([*PLAN, "--dataset", "uniform:1:1073741825"], "MAX <= 1073741824"),
        ([*PLAN, "--mask", "window:1073741825"], "mask window = 1073741825"),
        # ranks x tokens-per-rank overflowed: 0 tasks, "valid"; run ran nothing and reported error 0.
        ([*PLAN, "--tokens-per-rank", "4611686018427387904"], "tokens-per-rank = 4611686018427387904: must be <="),
        ([*PLAN, "--ranks", "65537", "--tokens-per-rank", "16"], "ranks = 65537: must be <= 65536"),
        ([*PLAN, "--ranks", "65536", "--tokens-per-rank", "2097152"], "ranks x tokens-per-rank = 65536 x 2097152"),
        (["run", "--tokens-per-rank", "9223372036854775807"], "tokens-per-rank = 9223372036854775807: must be <="),
        # DCP ran for minutes and out of memory (block 1: bad_alloc after 19 s; 64 ranks x 1M tokens per rank:
        # over 300 s); it refuses up front, naming dcp-block, its bounds and a block size that fits.
        (["plan", "--planners", "dcp", "--dcp-block", "1"], "dcp-block = 1: this batch has a document of"),
        (["plan", "--planners", "ring,dcp", "--ranks", "64", "--tokens-per-rank", "1048576"],
         "DCP plans at most 131072 computation blocks and 256 blocks per document"),
        (["plan", "--planners", "dcp", "--ranks", "64", "--tokens-per-rank", "1048576"], "use dcp-block >= "),
        # Integer options once clamped (2^63 became 2^63 - 1) or wrapped (-1 became 2^64 - 1).
        ([*PLAN, "--seed", "-1"], "--seed: -1: must be in [0, 18446744073709551615]"),
        ([*PLAN, "--seed", "18446744073709551616"], "--seed: 18446744073709551616: must be in"),
        ([*PLAN, "--tokens-per-rank", "9223372036854775808"], "--tokens-per-rank: 9223372036854775808: must be in"),
        (["run", "--seed", "-5"], "--seed: -5"),
        (["bench", "kernels", "--lengths", "100,-99999999999999999999"], "--lengths: -99999999999999999999"),
        ([*SIMULATE, "--iterations", "-9223372036854775809"], "--iterations"),
        # A leading zero read as octal: 010 tokens per rank planned 8.
        ([*PLAN, "--tokens-per-rank", "010"], "--tokens-per-rank: 010: a leading 0 would read as octal"),
        ([*PLAN, "--seed", "-07"], "--seed: -07: a leading 0"),
        # A list that names a planner or mode twice (plan's JSON kept one of two printed rows).
        (["plan", "--planners", "distca,distca"], "planners = 'distca,distca': 'distca' is named twice"),
        (["run", "--planners", "packed,packed"], "planners = 'packed,packed'"),
        (["run", "--modes", "pingpong,pingpong"], "modes = 'pingpong,pingpong'"),
        ([*SIMULATE, "--planners", "packed,packed"], "planners = 'packed,packed'"),
    ]
    for args, field in bad_inputs:
        result = run(*args)
        lines = result.stderr.strip().splitlines()
        check(result.returncode == 2, f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()})")
        check(len(lines) == 1, f"{args}: expected one stderr line, got {lines}")
        check(field in result.stderr, f"{args}: message does not name '{field}': {result.stderr.strip()}")

    # At the limits: the largest document over 4 ranks of a quarter of it each. The packed causal document's
    # per-rank pairs grow as 1, 3, 5, 7 (in units of a quarter squared / 2, to within 2^-28): imbalance 7/4.
    out = os.path.join(tmp, "largest.json")
    result = run(*PLAN, "--ranks", "4", "--tokens-per-rank", "268435456", "--json", out,
                 "--dataset", lengths_file("largest.txt", "1073741824\n"))
    check(result.returncode == 0, f"plan at the largest document: exit {result.returncode}: {result.stderr}")
    if result.returncode == 0:
        row = json.load(open(out))["planners"]["packed"]
        check(abs(row["imbalance"] - 1.75) < 1e-6 and row["valid"] is True, f"largest document: {row}")
    # The largest seed is a seed, not an error.
    result = run(*PLAN, "--seed", "18446744073709551615", "--tokens-per-rank", "4096")
    check(result.returncode == 0, f"plan --seed 2^64-1: exit {result.returncode}: {result.stderr}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("cli limits: all checks passed")
