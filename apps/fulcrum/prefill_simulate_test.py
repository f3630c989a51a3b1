#!/usr/bin/env python3
"""`fulcrum prefill --simulate`'s contract, run by ctest: `prefill_simulate_test.py PATH_TO_FULCRUM SOURCE_DIR`.

The shipped MInference-style report on Llama-3-8B, simulated on the A800 and RTX 3090 presets with several
solvers and WPR / CPIP on and off, prints a table and writes JSON whose totals hold together (latency = Σ
T_layer + first load, tokens/s = T / latency, T_layer = slowest phases + two all-reduces); lpt-ls is never
slower than uniform; bad input exits with code 2 and one stderr line naming the field.
"""
import json
import os
import subprocess
import sys
import tempfile

FULCRUM, SOURCE = sys.argv[1], sys.argv[2]
EXAMPLE = os.path.join(SOURCE, "data", "heads", "llama3-8b-262k-minference.json")
failures = []


def run(*args):
    return subprocess.run([FULCRUM, "prefill", *args], capture_output=True, text=True, timeout=600)


def check(condition, message):
    if not condition:
        failures.append(message)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


def check_bad_input(args, field):
    result = run(*args)
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 2, f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()})")
    check(len(lines) == 1, f"{args}: expected one stderr line, got {lines}")
    check(field in result.stderr, f"{args}: message does not name '{field}': {result.stderr.strip()}")


LLAMA = ["--model", "llama3-8b", "--patterns", EXAMPLE, "--tokens", "65536"]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "a800.json")
    result = run("--simulate", "a800-sxm", "--ranks", "8", *LLAMA, "--solver", "uniform,greedy,lpt-ls",
                 "--wpr", "0,1", "--cpip", "0,1", "--json", out)
    check(result.returncode == 0, f"prefill --simulate exited {result.returncode}: {result.stderr}")
    check("prefill simulated on a800-sxm" in result.stdout and "tokens/s" in result.stdout, "table header")
    data = json.load(open(out))
    check(data["devices"] == 8 and data["layers"] == 32 and data["tokens"] == 65536, f"header: {data.keys()}")
    configs = data["configs"]
    check(len(configs) == 3 * 2 * 2, f"{len(configs)} configurations, expected 12")
    for c in configs:
        name = f"{c['solver']} W{c['wpr']} C{c['cpip']}"
        check(len(c["layers"]) == 32, f"{name}: layers")
        total = c["first_load_s"]
        for layer in c["layers"]:
            check(len(layer["block_s"]) == 8, f"{name}: per-device times")
            expected = layer["attention_phase_s"] + layer["mlp_phase_s"] + 2 * layer["all_reduce_s"]
            check(close(layer["layer_s"], expected), f"{name}: T_layer {layer['layer_s']} != {expected}")
            check(layer["attention_phase_s"] >= max(layer["block_s"]) * (1 - 1e-12), f"{name}: slowest device")
            total += layer["layer_s"]
        check(close(c["latency_s"], total), f"{name}: latency {c['latency_s']} != Σ {total}")
        check(close(c["tokens_per_s"], 65536 / c["latency_s"]), f"{name}: tokens/s")
    by = {(c["solver"], c["wpr"], c["cpip"]): c for c in configs}
    for wpr in (False, True):
        for cpip in (False, True):
            check(by[("lpt-ls", wpr, cpip)]["mean_spread"] <= by[("uniform", wpr, cpip)]["mean_spread"],
                  f"lpt-ls spreads more than uniform (W{wpr} C{cpip})")
        check(by[("lpt-ls", wpr, False)]["latency_s"] <= by[("uniform", wpr, False)]["latency_s"] * (1 + 1e-12),
              f"lpt-ls slower than uniform (W{wpr})")
    # CPIP hides the weight stream; WPR shrinks it.
    check(by[("lpt-ls", True, True)]["latency_s"] < by[("lpt-ls", True, False)]["latency_s"], "CPIP did not help")
    check(by[("lpt-ls", True, False)]["latency_s"] < by[("lpt-ls", False, False)]["latency_s"], "WPR did not help")

    # The 3090 node: 4 devices by default (the preset's node), all-reduces over PCIe.
    result = run("--simulate", "rtx3090x4-pcie", *LLAMA, "--json", out)
    check(result.returncode == 0, f"rtx3090 exited {result.returncode}: {result.stderr}")
    data = json.load(open(out))
    check(data["devices"] == 4 and data["configs"][0]["solver"] == "lpt-ls", "3090 default devices / solver")

# Bad input: one line naming the field, exit 2.
check_bad_input(["--simulate", "b200", "--model", "llama3-8b", "--patterns", EXAMPLE], "hardware = 'b200'")
check_bad_input(["--simulate", "a800-sxm", "--ranks", "33", "--model", "llama3-8b", "--patterns", EXAMPLE],
                "ranks = 33")
check_bad_input(["--simulate", "a800-sxm", "--tokens", "0"], "tokens = 0")
check_bad_input(["--simulate", "a800-sxm", "--tokens", "-5"], "tokens = -5")
check_bad_input(["--simulate", "a800-sxm", "--solver", "fastest"], "solver")
check_bad_input(["--simulate", "a800-sxm", "--cpip", "2"], "cpip = '2'")
check_bad_input(["--simulate", "a800-sxm", "--assignment", "x.json"], "assignment")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
