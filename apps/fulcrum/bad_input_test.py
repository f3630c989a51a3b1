#!/usr/bin/env python3
"""The table-driven bad-input suite, run by ctest: `bad_input_test.py PATH_TO_FULCRUM`.

Every case must exit 2 within seconds with exactly one stderr line that names the field: bad input is
refused before any work. Two tables:
- generated from every subcommand's --help: each numeric option given values it cannot hold (an empty
  value, text, a negative, inf and NaN; for an integer a fraction, beyond 64 bits either way and a leading
  zero that would read as octal; for a real number 1e300);
- written by hand: values of the right type that are out of range or inconsistent, per subcommand.
A new option is covered by the first table as soon as it exists.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

FULCRUM = sys.argv[1]
SUBCOMMANDS = [["plan"], ["simulate"], ["run"], ["demo"], ["profile"], ["heads"], ["prefill"], ["bench", "kernels"],
               ["bench", "comm"]]
INTEGER_BAD = ["", "abc", "1.5", "-1", "99999999999999999999", "-99999999999999999999", "010", "inf", "nan"]
REAL_BAD = ["", "abc", "-1", "1e300", "nan", "inf", "-inf"]
# "  --ranks INT=4   ..." or "  -q,--q-heads INT ..."; a list option ("INT ...") takes the bad value as its element.
OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)\s+(INT|UINT|FLOAT)\b")


def numeric_options(subcommand):
    text = subprocess.run([FULCRUM, *subcommand, "--help"], capture_output=True, text=True, check=True).stdout
    return [(m.group(1), m.group(2)) for m in map(OPTION.match, text.splitlines()) if m]


def generated_cases():
    cases = []
    for subcommand in SUBCOMMANDS:
        for option, kind in numeric_options(subcommand):
            for value in REAL_BAD if kind == "FLOAT" else INTEGER_BAD:
                cases.append(([*subcommand, option, value], option.removeprefix("--")))
    return cases


def hand_written_cases(tmp):
    def file_with(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    lengths = file_with("lengths.json", "[1.5, 2.7, 100]")
    negative = file_with("negative.txt", "100\n-5\n")
    empty = file_with("empty.txt", "")
    hardware = file_with("hardware.json", '{"name": "x"}')
    deep = file_with("deep.json", "[" * 100000 + "]" * 100000)  # overflowed the parser's stack in every reader
    plan, simulate = ["plan", "--planners", "packed"], ["simulate", "--gpus", "8", "--max-doc-len", "16384"]
    return [
        ([*plan, "--ranks", "0"], "ranks"),
        ([*plan, "--boundary-split", "zigzag"], "boundary-split"),
        (["plan", "--planners", "distca", "--partial-kv", "2"], "partial-kv"),
        (["plan", "--planners", "distca", "--busiest-first", "1.5"], "busiest-first"),
        (["plan", "--planners", "distca", "--rehome", "2"], "rehome"),
        (["plan", "--planners", "distca", "--rehome-bytes", "1.5"], "rehome-bytes"),
        ([*plan, "--ranks", "-3"], "ranks"),
        ([*plan, "--tokens-per-rank", "0"], "tokens-per-rank"),
        ([*plan, "--planners", ""], "planners"),
        (["plan", "--planners", "nosuch"], "nosuch"),
        (["plan", "--planners", "distca,distca"], "planners"),
        ([*plan, "--candidates", "distca"], "candidates: only auto"),
        (["plan", "--planners", "auto", "--candidates", "wlb"], "candidates: wlb"),
        (["plan", "--planners", "auto", "--hardware", "nosuch"], "hardware = 'nosuch'"),
        ([*simulate, "--planners", "auto", "--candidates", "distca,nosuch"], "candidates: 'nosuch'"),
        (["run", "--planners", "auto", "--candidates", "distca,distca"], "candidates = 'distca,distca'"),
        ([*plan, "--mask", "window:0"], "window"),
        ([*plan, "--mask", "lambda:-1:4"], "sink"),
        ([*plan, "--mask", "blockwise:0:1"], "block"),
        ([*plan, "--mask", "nosuch"], "mask"),
        ([*plan, "--mask", "vslash:1:x"], "mask"),
        ([*plan, "--dataset", "file:" + lengths], "lengths.json"),
        ([*plan, "--dataset", "file:" + negative], "negative.txt"),
        ([*plan, "--dataset", "file:" + empty], "empty.txt"),
        ([*plan, "--dataset", "file:" + os.path.join(tmp, "missing.txt")], "missing.txt"),
        ([*plan, "--dataset", "nosuch"], "dataset"),
        ([*plan, "--dataset", "uniform:10:5"], "dataset"),
        ([*plan, "--model", "nosuch"], "model"),
        ([*plan, "--batches", "0"], "batches"),
        ([*simulate, "--gpus", "0"], "gpus"),
        ([*simulate, "--cp", "-5"], "--cp: cp-degree = -5"),  # the deprecated alias ran as the default
        (["run", "--ranks", "2", "--inject-failure", "0x1:throw"], "inject-failure = '0x1:throw'"),
        ([*simulate, "--recompute", "some"], "recompute = 'some'"),
        ([*simulate, "--zero1", "2"], "zero1 = '2'"),
        ([*simulate, "--sweep", "zero1=1,yes"], "zero1 = 'yes'"),
        ([*simulate, "--sweep", "gpus=99999999999"],
         "gpus = '99999999999': must be a whole number in [-2147483648, 2147483647]"),
        ([*simulate, "--sweep", "seed=-1"], "seed = '-1': must be a whole number in [0, 18446744073709551615]"),
        ([*simulate, "--planners", "nosuch"], "nosuch"),
        ([*simulate, "--planners", "packed,packed"], "planners"),
        ([*simulate, "--hardware", hardware], "hardware.json"),
        ([*simulate, "--hardware", tmp], tmp),
        ([*simulate, "--hardware", "nosuch"], "nosuch"),
        ([*simulate, "--iterations", "0"], "iterations"),
        ([*simulate, "--layer-schedule", "overlapped"], "layer-schedule = 'overlapped'"),
        ([*simulate, "--max-doc-len", "0"], "max-doc-len"),
        (["run", "--ranks", "-1"], "ranks"),
        (["run", "--planners", "nosuch"], "nosuch"),
        (["run", "--modes", "nosuch"], "nosuch"),
        (["run", "--tokens-per-rank", "0"], "tokens-per-rank"),
        (["bench", "kernels", "--lengths", "0"], "lengths"),
        (["bench", "kernels", "--dtype", "fp8"], "dtype"),
        (["bench", "kernels", "--mask", "window:0"], "window"),
        (["bench", "kernels", "--q-heads", "3", "--kv-heads", "2"], "heads"),
        (["bench", "kernels", "--simd", "sse4"], "simd"),
        (["heads", "--scenario", "S11"], "scenario"),
        (["heads", "--scenario", "S1", "--solvers", "nosuch"], "nosuch"),
        (["heads", "--scenario", "S1", "--solvers", "greedy,greedy"], "solvers"),
        (["profile", "--json", ""], "json"),
        (["profile", "--out", ""], "out"),  # the old spelling is refused empty too
        (["demo", "--out", ""], "out"),
        (["models", deep], "deep.json: nested deeper than the 512 levels"),
        ([*plan, "--model", deep], "deep.json: nested deeper"),
        ([*plan, "--dataset", "file:" + deep], "deep.json: nested deeper"),
        ([*simulate, "--hardware", deep], "deep.json: nested deeper"),
        (["run", "--simulate", deep], "deep.json: nested deeper"),
        (["heads", "--patterns", deep], "deep.json: nested deeper"),
        (["prefill", "--patterns", deep], "deep.json: nested deeper"),
        (["prefill", "--simulate", deep], "deep.json: nested deeper"),
        (["plan", "--nosuch-option", "1"], "--nosuch-option"),
        (["nosuch-subcommand"], "nosuch-subcommand"),
        (["plam"], "did you mean 'plan'"),
        (["plan", "--planer", "distca"], "unknown option '--planer' (did you mean '--planners'?)"),
        (["bench", "kernels", "--lenghts", "64"], "did you mean '--lengths'"),
        (["run", "--ranks", "2", "--nosuch-flag"], "fulcrum run: unknown option '--nosuch-flag'"),
    ]


def run_case(case):
    args, field = case
    try:
        result = subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"{args}: still running after 60 s (the input was not refused up front)"
    lines = result.stderr.strip().splitlines()
    if result.returncode != 2:
        return f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()[:200]})"
    if len(lines) != 1:
        return f"{args}: {len(lines)} stderr lines, expected one: {lines[:4]}"
    if field not in lines[0]:
        return f"{args}: the error does not name {field!r}: {lines[0]}"
    return None


with tempfile.TemporaryDirectory() as tmp:
    generated, written = generated_cases(), hand_written_cases(tmp)
    cases = generated + written
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        failures = [f for f in pool.map(run_case, cases) if f is not None]

print(f"bad_input_test: {len(cases)} cases ({len(generated)} generated from --help), {len(failures)} failed")
for failure in failures:
    print("FAIL:", failure)
if len(cases) < 300:
    print(f"FAIL: only {len(cases)} cases; the suite promises at least 300")
    sys.exit(1)
sys.exit(1 if failures else 0)
