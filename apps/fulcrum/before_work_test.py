#!/usr/bin/env python3
"""Limits before work, run by ctest (cli_before_work): `before_work_test.py PATH_TO_FULCRUM SOURCE_DIR`.

Every output path is checked before the work starts and every write failure (a full disk included) is
bad input naming the option; every option with a cost has a stated bound or an up-front estimate; a
hardware file's numbers lie in sane ranges. Each case expects exit 2, one stderr line naming the field,
and, where the work would print, nothing on stdout: the error came before the work.
"""
import json
import os
import subprocess
import sys
import tempfile

FULCRUM, SOURCE = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    # A hang guard, not a timing: every case here ends in well under a second when it holds.
    try:
        return subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -1, "", "timed out after 300 s")


def expect_bad_input(args, field, before_work=True):
    result = run(*args)
    lines = result.stderr.strip().splitlines()
    if result.returncode != 2 or len(lines) != 1 or field not in result.stderr:
        failures.append(f"{args}: exit {result.returncode}, want 2 and one line naming '{field}': {lines}")
    elif before_work and result.stdout.strip():
        failures.append(f"{args}: failed only after the work: {result.stdout.strip()[:200]}")


SMALL_PLAN = ["plan", "--planners", "packed", "--ranks", "2", "--tokens-per-rank", "1024"]
SMALL_SIM = ["simulate", "--gpus", "16", "--max-doc-len", "8192", "--planners", "packed"]
SMALL_RUN = ["run", "--backend", "local", "--ranks", "2", "--planners", "packed", "--tokens-per-rank", "512",
             "--dataset", "uniform:100:400"]
SMALL_BENCH = ["bench", "kernels", "--lengths", "64", "--q-heads", "1", "--kv-heads", "1", "--head-dim", "16",
               "--repeats", "1", "--split-length", "0", "--no-backward"]
SMALL_PROFILE = ["profile", "--query-lengths", "64", "--key-lengths", "64", "--q-heads", "1", "--kv-heads", "1",
                 "--head-dim", "16", "--repeats", "1"]

with tempfile.TemporaryDirectory() as tmp:
    # Write failures after the work (a full disk): reported, naming the option.
    for args, field in [
        ([*SMALL_PLAN, "--json", "/dev/full"], "json = '/dev/full'"),
        ([*SMALL_SIM, "--json", "/dev/full"], "json = '/dev/full'"),
        ([*SMALL_SIM, "--csv", "/dev/full"], "csv = '/dev/full'"),
        ([*SMALL_SIM, "--trace", "/dev/full"], "trace = '/dev/full'"),
        ([*SMALL_RUN, "--json", "/dev/full"], "json = '/dev/full'"),
        ([*SMALL_BENCH, "--json", "/dev/full"], "json = '/dev/full'"),
        ([*SMALL_PROFILE, "--json", "/dev/full"], "json = '/dev/full'"),
    ]:
        expect_bad_input(args, field, before_work=False)

    # Paths that cannot be written fail before the work, and leave nothing behind.
    missing = os.path.join(tmp, "no-such-folder", "x.json")
    for args, field in [
        (["demo", "--out", "/proc/fulcrum-x"], "out = '/proc/fulcrum-x'"),
        (["demo", "--out", ""], "--out"),
        ([*SMALL_PLAN, "--json", ""], "--json"),
        ([*SMALL_PLAN, "--json", missing], "json = "),
        ([*SMALL_PLAN, "--json", tmp], "is a directory"),
        ([*SMALL_SIM, "--svg", missing], "svg = "),
        ([*SMALL_RUN, "--trace", missing], "trace = "),
        ([*SMALL_RUN, "--save-plans", "/proc/fulcrum-x"], "save-plans = '/proc/fulcrum-x'"),
        ([*SMALL_BENCH, "--json", missing], "json = "),
        ([*SMALL_PROFILE, "--json", missing], "json = "),
    ]:
        expect_bad_input(args, field)
    good = os.path.join(tmp, "kept.json")
    result = run(*SMALL_PLAN, "--json", good)
    if result.returncode != 0 or "packed" not in json.load(open(good))["planners"]:
        failures.append(f"plan --json to a writable path: exit {result.returncode}: {result.stderr.strip()}")
    if os.listdir(tmp) != ["kept.json"]:
        failures.append(f"the checks left files behind: {os.listdir(tmp)}")

    # Options with a cost: a stated bound or an estimate, before any work.
    for args, field in [
        ([*SMALL_SIM, "--microbatches", "2147483647"], "microbatches = 2147483647"),
        ([*SMALL_SIM, "--microbatches", "1024", "--iterations", "100"], "microbatches = 1024"),
        ([*SMALL_SIM, "--sweep", "seed=" + ",".join(str(s) for s in range(1001))], "sweep"),
        (["plan", "--planners", "dcp", "--dcp-block", "1"], "dcp-block = 1"),
        (["plan", "--planners", "wlb", "--wlb-token-cap", "1e20"], "wlb-token-cap"),
        (["bench", "kernels", "--lengths", "100000000"], "lengths"),
        (["bench", "kernels", "--split-length", "100000000"], "split-length"),
        (["bench", "kernels", "--repeats", "1000000"], "repeats"),
        (["bench", "kernels", "--lengths", "131072", "--q-heads", "65536", "--kv-heads", "65536"], "lengths: 131072"),
        (["profile", "--query-lengths", "100000000"], "query-lengths"),
        (["profile", "--repeats", "1000000"], "repeats"),
        (["bench", "comm", "--sizes", "1099511627776"], "sizes: 1099511627776"),
        # At the supported limit (cli_limits tests beyond it), ranks on this machine still need their memory.
        (["run", "--backend", "local", "--ranks", "2", "--tokens-per-rank", "1073741824", "--dataset",
          "uniform:100:400"], "tokens-per-rank = 1073741824 on 2 ranks: needs about"),
    ]:
        expect_bad_input(args, field)

    # Hardware files: a folder, and numbers that pass as positive but make every time infinite.
    cpu = json.load(open(os.path.join(SOURCE, "data", "hardware", "cpu-local.json")))
    for name, edit, field in [
        ("latency.json", lambda h: h["intra_node"].update(latency_s=1e308), "hardware.intra_node.latency_s"),
        ("peak.json", lambda h: h.update(peak_flops=1e-300), "hardware.peak_flops"),
        ("rate.json", lambda h: h["attention"]["forward"].update(
            flops_per_s=[1e-300] * len(h["attention"]["forward"]["flops_per_s"])), "flops_per_s"),
    ]:
        bad = json.loads(json.dumps(cpu))
        edit(bad)
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            json.dump(bad, f)
        expect_bad_input([*SMALL_SIM, "--hardware", path], field)
        os.remove(path)
    expect_bad_input([*SMALL_SIM, "--hardware", tmp], "hardware = ")
    expect_bad_input([*SMALL_PLAN, "--dataset", "file:" + tmp], "is a directory")

    # A table printed to a full disk is a failed run (it exited 0): stdout is checked when it is flushed.
    with open("/dev/full", "w") as full:
        result = subprocess.run([FULCRUM, *SMALL_PLAN], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    if result.returncode != 1 or "standard output: write failed (No space left on device)" not in result.stderr:
        failures.append(f"plan > /dev/full: exit {result.returncode}, want 1 naming standard output: {result.stderr}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("cli before work: all checks passed")
