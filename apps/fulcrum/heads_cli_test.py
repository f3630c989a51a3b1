#!/usr/bin/env python3
"""`fulcrum heads`' contract, run by ctest: `heads_cli_test.py PATH_TO_FULCRUM SOURCE_DIR`.

A scenario and the shipped MInference-style pattern file print every solver and write JSON with the
documented keys; ours is never worse than another solver and never below the lower bound; bad input exits
with code 2 and one stderr line naming the field.
"""
import json
import os
import subprocess
import sys
import tempfile

FULCRUM, SOURCE = sys.argv[1], sys.argv[2]
EXAMPLE = os.path.join(SOURCE, "data", "heads", "llama3-8b-262k-minference.json")
SOLVERS = ["uniform", "random", "random-uniform", "greedy", "sa", "ga", "lpt-ls"]
failures = []


def run(*args):
    return subprocess.run([FULCRUM, "heads", *args], capture_output=True, text=True, timeout=600)


def check(condition, message):
    if not condition:
        failures.append(message)


def check_bad_input(args, field):
    result = run(*args)
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 2, f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()})")
    check(len(lines) == 1, f"{args}: expected one stderr line, got {lines}")
    check(field in result.stderr, f"{args}: message does not name '{field}': {result.stderr.strip()}")


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "s7.json")
    result = run("--scenario", "S7", "--repeats", "1", "--json", out)
    check(result.returncode == 0, f"heads --scenario S7 exited {result.returncode}: {result.stderr}")
    for name in SOLVERS:
        check(name in result.stdout, f"table lacks a row for {name}")
    data = json.load(open(out))
    check(data["devices"] == 4 and data["q_heads"] == 32 and data["kv_heads"] == 8, f"S7 shape: {data}")
    layer = data["layers"][0]
    ours = layer["solvers"]["lpt-ls"]["layer_s"]
    for name in SOLVERS:
        row = layer["solvers"][name]
        for key in ("assignment", "device_s", "layer_s", "spread", "gap", "lower_bound_s", "solve_ms",
                    "proven_optimal"):
            check(key in row, f"layers[0].solvers.{name} lacks {key}")
        check(len(row["assignment"]) == 32 and all(0 <= d < 4 for d in row["assignment"]), f"{name}: assignment")
        check(abs(max(row["device_s"]) - row["layer_s"]) <= 1e-12 * row["layer_s"], f"{name}: T_layer != max device")
        check(row["layer_s"] >= row["lower_bound_s"] * (1 - 1e-12), f"{name} below the lower bound")
        check(ours <= row["layer_s"] * (1 + 1e-12), f"lpt-ls worse than {name}")

    # The shipped pattern file: 32 layers, MInference's class counts, every layer solved.
    report = json.load(open(EXAMPLE))
    counts = {}
    for layer in report["layers"]:
        for head in layer["heads"]:
            key = (head["kind"], head["verticals"], head["slashes"])
            counts[key] = counts.get(key, 0) + 1
    check(counts == {("vertical-slash", 1000, 6096): 473, ("vertical-slash", 30, 800): 278,
                     ("vertical-slash", 100, 800): 153, ("vertical-slash", 3500, 100): 89,
                     ("vertical-slash", 500, 700): 31}, f"example class counts: {counts}")
    out = os.path.join(tmp, "model.json")
    result = run("--patterns", EXAMPLE, "--devices", "4", "--solvers", "uniform,greedy,lpt-ls", "--repeats", "1",
                 "--tokens", "65536", "--json", out)
    check(result.returncode == 0, f"heads --patterns exited {result.returncode}: {result.stderr}")
    data = json.load(open(out))
    check(len(data["layers"]) == 32, f"layers: {len(data['layers'])}")
    check(data["solvers"]["lpt-ls"]["total_layer_s"] <= data["solvers"]["uniform"]["total_layer_s"],
          "lpt-ls slower than uniform over the model")
    result = run("--patterns", EXAMPLE, "--devices", "8", "--layer", "5", "--solvers", "lpt-ls", "--repeats", "1")
    check(result.returncode == 0 and "lower bound" in result.stdout, f"--layer 5: {result.stderr}")

    bad = os.path.join(tmp, "bad.json")
    broken = json.loads(json.dumps(report))
    broken["layers"][3]["heads"][7]["kind"] = "diagonal"
    json.dump(broken, open(bad, "w"))
    short = os.path.join(tmp, "short.json")
    broken = json.loads(json.dumps(report))
    broken["layers"][2]["heads"].pop()
    json.dump(broken, open(short, "w"))
    window = os.path.join(tmp, "window.json")
    broken = json.loads(json.dumps(report))
    broken["layers"][0]["heads"][1] = {"kind": "a-shape", "sink": 4, "window": 0}
    json.dump(broken, open(window, "w"))
    bad_inputs = [
        (["--scenario", "S3", "--devices", "17"], "devices = 17"),
        (["--scenario", "S11"], "scenario"),
        (["--scenario", "S1", "--solvers", "uniform,hungarian"], "solver = 'hungarian'"),
        (["--scenario", "S1", "--solvers", "greedy,greedy"], "solvers = 'greedy,greedy': 'greedy' is named twice"),
        (["--patterns", bad, "--devices", "4"], "patterns.layers[3].heads[7].kind"),
        (["--patterns", short, "--devices", "4"], "patterns.layers[2].heads"),
        (["--patterns", window, "--devices", "4"], "patterns.layers[0].heads[1].window = 0"),
        (["--patterns", os.path.join(tmp, "missing.json"), "--devices", "4"], "missing.json"),
        (["--patterns", EXAMPLE], "devices"),
        (["--patterns", EXAMPLE, "--devices", "4", "--layer", "32"], "layer"),
        (["--scenario", "S1", "--patterns", EXAMPLE], "scenario"),
        (["--scenario", "S1", "--tokens", "0"], "tokens"),
        (["--scenario", "S1", "--profile", os.path.join(tmp, "none.json")], "none.json"),
        (["--scenario", "S1", "--devices", "many"], "--devices"),
    ]
    for args, field in bad_inputs:
        check_bad_input(args, field)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("heads cli contract: all checks passed")
