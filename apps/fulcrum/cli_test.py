#!/usr/bin/env python3
"""The fulcrum CLI's contract, run by ctest: `cli_test.py PATH_TO_FULCRUM`.

Good input prints the comparison table and writes JSON with the documented keys; bad input exits
with code 2 and a single stderr line that names the offending field.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

FULCRUM = sys.argv[1]
failures = []


def run(*args):
    # Generous: under ASan on a loaded 2-core machine `bench kernels` alone takes about 2 minutes.
    return subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=600)


def check(condition, message):
    if not condition:
        failures.append(message)


def check_bad_input(args, result, field):
    """Bad input: exit code 2 and a single stderr line naming the field."""
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 2, f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()})")
    check(len(lines) == 1, f"{args}: expected one stderr line, got {lines}")
    check(field in result.stderr, f"{args}: message does not name '{field}': {result.stderr.strip()}")


# --version: one line naming the version, the git revision (or "unknown" outside a checkout), the build
# type, the compiler and the kernel ISA that runs.
result = run("--version")
check(result.returncode == 0, f"--version exited {result.returncode}: {result.stderr}")
check(re.fullmatch(r"fulcrum \d+\.\d+\.\d+ \(git ([0-9a-f]+(-dirty)?|unknown), \w+ build, (GCC|Clang) [^)]+\); "
                   r"kernels: (baseline|avx2|avx512) .*\n", result.stdout) is not None,
      f"--version printed {result.stdout!r}")

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "plan.json")
    result = run("plan", "--ranks", "4", "--tokens-per-rank", "8192", "--batches", "3", "--json", out)
    check(result.returncode == 0, f"plan exited {result.returncode}: {result.stderr}")
    for name in ("distca", "packed", "perdoc-cp", "wlb"):
        check(name in result.stdout, f"table lacks a row for {name}")
    data = json.load(open(out))
    for name in ("distca", "packed", "perdoc-cp", "wlb"):
        row = data["planners"][name]
        for key in ("imbalance", "memory_imbalance", "comm_bytes_total", "comm_bytes_max_rank", "tasks", "plan_ms",
                    "valid"):
            check(key in row, f"planners.{name} lacks {key}")
        check(row["valid"] is True, f"{name} did not verify")
    check(data["planners"]["packed"]["comm_bytes_total"] <= data["planners"]["perdoc-cp"]["comm_bytes_total"],
          "packed moved more than perdoc-cp")

    lengths = os.path.join(tmp, "lengths.txt")
    with open(lengths, "w") as f:
        f.write("100\n-5\n")
    zeros = os.path.join(tmp, "zeros.json")
    with open(zeros, "w") as f:
        f.write("[100, 0]")
    good = os.path.join(tmp, "good.txt")
    with open(good, "w") as f:
        f.write("700\n300\n5000\n")
    result = run("plan", "--dataset", "file:" + good, "--ranks", "2", "--tokens-per-rank", "2048")
    check(result.returncode == 0, f"file dataset failed: {result.stderr}")

    bad_inputs = [
        (["--ranks", "0"], "ranks"),
        (["--ranks", "-3"], "ranks"),
        (["--tokens-per-rank", "0"], "tokens-per-rank"),
        (["--granularity", "0"], "granularity"),
        (["--tokens-per-rank", "4096", "--granularity", "8192"], "granularity"),
        (["--model", "gpt-9"], "model"),
        (["--dataset", "file:/nonexistent/lengths.txt"], "dataset file"),
        (["--dataset", "file:" + lengths], "must be >= 1"),
        (["--dataset", "file:" + zeros], "must be >= 1"),
        (["--dataset", "uniform:0:10"], "dataset"),
        (["--dataset", "zipf"], "dataset"),
        (["--planners", "distca,magic"], "planner"),
        (["--tolerance", "-1"], "tolerance"),
        (["--batches", "0"], "batches"),
        (["--mask", "diagonal"], "mask"),
        (["--ranks", "many"], "--ranks"),
        (["--planners", "dcp", "--dcp-block", "0"], "dcp-block"),
        (["--planners", "dcp", "--dcp-epsilon-devices", "-0.1"], "dcp-epsilon-devices"),
    ]
    for args, field in bad_inputs:
        defaults = [] if "--tokens-per-rank" in args else ["--tokens-per-rank", "4096"]
        result = run("plan", *defaults, *args)
        check_bad_input(args, result, field)

    # Kernel measurements: a tiny real run of each, and their bad input.
    out = os.path.join(tmp, "bench.json")
    result = run("bench", "kernels", "--lengths", "200", "--q-heads", "2", "--kv-heads", "1", "--head-dim", "64",
                 "--split-length", "256", "--shards", "256,64", "--repeats", "1", "--json", out)
    check(result.returncode == 0, f"bench kernels exited {result.returncode}: {result.stderr}")
    check("% of peak" in result.stdout, "bench kernels table lacks '% of peak'")
    data = json.load(open(out))
    check(data["peak_flops"] > 0, "bench kernels: no peak")
    check([(r["study"], r["pass"]) for r in data["rows"]] ==
          [("length", "forward"), ("length", "backward"), ("shards", "forward"), ("shards", "forward")],
          f"bench kernels rows: {data['rows']}")
    check(all(r["gflops"] > 0 for r in data["rows"]), "bench kernels: a row without throughput")
    # --full with the sizes given beside it: the given ones win (the full grid itself takes minutes).
    result = run("bench", "kernels", "--full", "--lengths", "200", "--q-heads", "2", "--kv-heads", "1", "--head-dim",
                 "64", "--split-length", "0", "--no-backward", "--repeats", "1", "--json", out)
    check(result.returncode == 0, f"bench kernels --full exited {result.returncode}: {result.stderr}")
    check([(r["study"], r["length"]) for r in json.load(open(out))["rows"]] == [("length", 200)],
          f"bench kernels --full with --lengths 200 --split-length 0: {result.stdout}")

    out = os.path.join(tmp, "profile.json")
    result = run("profile", "--query-lengths", "64,128", "--key-lengths", "64,256", "--q-heads", "2", "--kv-heads", "2",
                 "--head-dim", "64", "--repeats", "1", "--json", out)
    check(result.returncode == 0, f"profile exited {result.returncode}: {result.stderr}")
    data = json.load(open(out))
    for grid in ("forward", "backward"):
        check(data[grid]["query_lengths"] == [64, 128] and data[grid]["key_lengths"] == [64, 256],
              f"profile {grid} axes: {data[grid]}")
        check(len(data[grid]["flops_per_s"]) == 4 and min(data[grid]["flops_per_s"]) > 0,
              f"profile {grid} values: {data[grid]['flops_per_s']}")

    # The training simulator: a small sweep writes the table, JSON, CSV, both charts and a trace.
    outputs = ("sim.json", "sim.csv", "sim.svg", "sim.trace.json")
    sim_json, sim_csv, sim_svg, sim_trace = (os.path.join(tmp, n) for n in outputs)
    result = run("simulate", "--gpus", "16", "--tp", "8", "--max-doc-len", "16384", "--planners", "distca,wlb,packed",
                 "--modes", "pingpong,signal", "--sweep", "pp=1,2", "--json", sim_json, "--csv", sim_csv,
                 "--svg", sim_svg,
                 "--trace", sim_trace)
    check(result.returncode == 0, f"simulate exited {result.returncode}: {result.stderr}")
    check("distca/signal" in result.stdout and "speedup" in result.stdout, "simulate table lacks rows or legend")
    data = json.load(open(sim_json))
    check(data["reference"] == "wlb" and len(data["rows"]) == 8, f"simulate rows: {len(data['rows'])}")
    for row in data["rows"]:
        parts = sum(row["breakdown"].values())
        check(abs(parts - row["mean_iteration_s"]) <= 1e-6 * row["mean_iteration_s"], f"breakdown != iteration: {row}")
        check(row["memory"]["out_of_memory"] in (True, False), "memory lacks out_of_memory")
    check(open(sim_csv).read().count("\n") == 9, "simulate CSV: header + 8 rows")
    check(open(sim_svg).read().startswith("<svg"), "simulate speedup chart")
    check(open(os.path.join(tmp, "sim-breakdown.svg")).read().startswith("<svg"), "simulate breakdown chart")
    check(len(json.load(open(sim_trace))["traceEvents"]) > 0, "simulate trace is empty")
    check(all(row["iterations"] == 16 for row in data["rows"]), "simulate's default is not 16 iterations")
    # A deferring reference whose queue took in or gave out much of a short window's work is named on stderr,
    # with the way out; at the defaults it is not.
    check("warning" not in result.stderr, f"simulate warned at its defaults: {result.stderr}")
    result = run("simulate", "--gpus", "64", "--planners", "wlb,packed", "--iterations", "1", "--json", sim_json)
    check(result.returncode == 0, f"simulate --iterations 1 exited {result.returncode}: {result.stderr}")
    check(re.search(r"fulcrum: warning: wlb at base: its queue of deferred documents (took in|gave out) \d+% of "
                    r"the window's work over 1 iteration, .*every speedup at this point \(it is the reference\) .*; "
                    r"give --iterations \d+ or more", result.stderr) is not None,
          f"no queue warning: {result.stderr!r}")
    wlb = next(row for row in json.load(open(sim_json))["rows"] if row["planner"] == "wlb")
    check(abs(1 - wlb["computed_work_share"]) > 0.1 and wlb["warmup_iterations"] == 4,
          f"wlb's window: {wlb['computed_work_share']}")
    # -q: results and errors only, wherever it goes; with -v too it is bad input.
    for quiet in (["-q", "simulate"], ["simulate", "--quiet"]):
        result = run(*quiet, "--gpus", "64", "--planners", "wlb,packed", "--iterations", "1")
        check(result.returncode == 0 and result.stderr == "" and "wlb" in result.stdout,
              f"{quiet}: exit {result.returncode}, stderr {result.stderr!r}")
    check_bad_input(["-q", "plan", "-v"], run("-q", "plan", "-v"), "quiet / verbose: give at most one of -q and -v")

    # Progress: on stderr, only on a terminal unless -v (where it is one line per step); never with -q.
    progress_cases = [
        (["run", "--backend", "local", "--ranks", "2", "--tokens-per-rank", "1024", "--planners", "distca,packed"],
         ["run: job 1/2: distca / pingpong on 2 ranks", "run: job 2/2: packed / pingpong", "run: 2 jobs done"]),
        (["bench", "kernels", "--lengths", "256", "--split-length", "0", "--repeats", "1", "--no-backward"],
         ["bench kernels: 0/1 cells", "bench kernels: 1/1 cells"]),
        (["simulate", "--gpus", "16", "--max-doc-len", "8192", "--iterations", "1", "--planners", "packed"],
         ["] 1/1 runs"]),
    ]
    for args, lines in progress_cases:
        verbose, plain = run("-v", *args), run(*args)
        check(verbose.returncode == 0 and all(line in verbose.stderr for line in lines),
              f"-v {args}: no progress lines {lines}: {verbose.stderr!r}")
        check(plain.returncode == 0 and plain.stderr == "", f"{args} off a terminal wrote {plain.stderr!r}")

    # Old spellings work for one release, warn naming the new one, and give the same result.
    small_sim = ["simulate", "--gpus", "16", "--max-doc-len", "16384", "--iterations", "2"]
    new = run(*small_sim, "--planners", "wlb,packed", "--cp-degree", "2")
    old = run(*small_sim, "--systems", "wlb,packed", "--cp", "2")
    check(new.returncode == 0 and old.returncode == 0 and new.stdout == old.stdout,
          f"--systems/--cp differ from --planners/--cp-degree: {old.stderr}")
    for alias, canonical in (("--systems", "--planners"), ("--cp", "--cp-degree")):
        check(f"fulcrum: warning: {alias} is deprecated and goes in the next release: write {canonical}"
              in old.stderr, f"no deprecation warning for {alias}: {old.stderr!r}")
    check("warning" not in new.stderr, f"the new spellings warned: {new.stderr!r}")
    check_bad_input(["simulate --cp --cp-degree"], run(*small_sim, "--cp", "2", "--cp-degree", "2"),
                    "--cp / --cp-degree: give one (--cp is the old spelling of --cp-degree)")
    # A planner flag that no planner of the run reads is named on stderr, not dropped silently.
    small_plan = ["plan", "--ranks", "4", "--tokens-per-rank", "4096", "--busiest-first", "1"]
    result = run(*small_plan, "--planners", "packed")
    check(result.returncode == 0 and "fulcrum: warning: --busiest-first is read only by distca, and this run plans "
          "packed: it has no effect" in result.stderr, f"no warning for an unread planner flag: {result.stderr!r}")
    result = run(*small_plan, "--planners", "packed,distca")
    check(result.returncode == 0 and "warning" not in result.stderr, f"a read planner flag warned: {result.stderr!r}")
    result = run(*small_sim, "--planners", "wlb", "--sweep", "busiest-first=0,1", "--sweep", "gpus=16")
    check(result.returncode == 0 and "fulcrum: warning: --sweep busiest-first is read only by distca, and this run "
          "plans wlb: it has no effect" in result.stderr and "--sweep gpus" not in result.stderr,
          f"no warning (or one too many) for an unread sweep axis: {result.stderr!r}")
    help_text = run("run", "--help").stdout
    check("--reference TEXT=kernel" in help_text and "ENUM" not in help_text, "run --help's --reference is raw")
    simulate_bad_inputs = [
        (["--tp", "3"], "tp = 3"),
        (["--gpus", "12"], "pp = 1"),
        (["--pp", "3"], "pp = 3"),
        (["--dp", "5"], "dp = 5"),
        (["--modes", "smoke"], "mode"),
        (["--planners", "distca,magic"], "planner"),
        (["--sweep", "colour=red"], "sweep key"),
        (["--hardware", "tpu-v9"], "hardware"),
        (["--iterations", "0"], "iterations"),
        (["--tokens-per-rank", "-1"], "tokens-per-rank"),
    ]
    for args, field in simulate_bad_inputs:
        base = ["--max-doc-len", "8192"] + ([] if "--gpus" in args else ["--gpus", "16"])
        check_bad_input(["simulate", *args], run("simulate", *base, *args), field)

    kernel_bad_inputs = [
        (["bench", "kernels", "--dtype", "fp16"], "dtype"),
        (["bench", "kernels", "--repeats", "0"], "repeats"),
        (["bench", "kernels", "--q-heads", "6", "--kv-heads", "4"], "q_heads"),
        (["bench", "kernels", "--lengths", "0"], "lengths"),
        (["bench", "kernels", "--mask", "diagonal"], "mask"),
        (["profile", "--query-lengths", "128,64"], "query-lengths"),
        (["profile", "--head-dim", "0"], "--head-dim: 0: must be in [1, 512]"),
        (["profile", "--dtype", "int8"], "dtype"),
    ]
    for args, field in kernel_bad_inputs:
        check_bad_input(args, run(*args), field)

    # Planner options are declared once (planners/registry): plan, run and simulate list the same flags with
    # the same help, defaults and ranges, and each accepts every one of them.
    def planner_option_lines(command):
        text = run(command, "--help").stdout
        check("Planner options:" in text, f"{command} --help has no planner options")
        return text.split("Planner options:")[1].split("\n\n")[0].strip().splitlines()

    option_help = planner_option_lines("plan")
    for command in ("run", "simulate"):
        check(planner_option_lines(command) == option_help, f"{command} --help lists other planner options than plan")
    flags = [line.split()[0] for line in option_help if line.lstrip().startswith("--")]
    for flag in ("--tolerance", "--granularity", "--cp-degree", "--wlb-token-cap", "--dcp-block", "--dcp-divisions",
                 "--dcp-epsilon-machines", "--dcp-epsilon-devices"):
        check(flag in flags, f"planner option {flag} missing from --help")
    # Every flag is accepted by every command (its default is in range), and a value out of range is bad
    # input naming the option, from any command.
    for flag in flags:
        line = next(h for h in option_help if h.lstrip().startswith(flag + " "))
        default = line.split("(default ")[1].split(";")[0] if "(default " in line else \
            option_help[option_help.index(line) + 1].split("(default ")[1].split(";")[0]
        result = run("plan", "--ranks", "4", "--tokens-per-rank", "2048", "--planners", "packed", flag, default)
        check(result.returncode == 0, f"plan {flag} {default}: exit {result.returncode}: {result.stderr.strip()}")
        for command in ("plan", "run", "simulate"):
            check_bad_input([command, flag, "-1"], run(command, flag, "-1"), flag[2:])

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("cli contract: all checks passed")
