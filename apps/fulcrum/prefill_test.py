#!/usr/bin/env python3
"""`fulcrum prefill` on real MPI processes, run by ctest.

  prefill_test.py FULCRUM ranks N    a Llama-shaped model from a config.json (8 q heads in 2 GQA groups), mixed
                                     head patterns, an assignment with uneven head counts and split KV groups,
                                     WPR and CPIP on and off side by side: every configuration equals the fp64
                                     reference (--check, max relative error 1e-5); JSON has the documented keys
  prefill_test.py FULCRUM failure    a rank whose weight read fails ends the job with its message, nonzero exit
  prefill_test.py FULCRUM bad-input  bad input exits 2 with one stderr line naming the field, before any rank starts
"""
import json
import os
import subprocess
import sys
import tempfile

FULCRUM, MODE = sys.argv[1], sys.argv[2]
failures = []
CONFIG = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 8, "num_key_value_heads": 2,
          "head_dim": 16, "num_hidden_layers": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}


def run(*args, timeout=300):
    return subprocess.run([FULCRUM, "prefill", *args], capture_output=True, text=True, timeout=timeout)


def check(condition, message):
    if not condition:
        failures.append(message)


def write(path, value):
    with open(path, "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return path


# Uneven counts per rank and both GQA groups (heads 0-3, 4-7) split, different in each layer.
ASSIGNMENTS = {2: [[0, 1, 0, 0, 1, 0, 1, 0], [1, 1, 1, 0, 0, 0, 0, 1]],
               4: [[0, 1, 2, 0, 1, 2, 3, 3], [3, 3, 0, 1, 2, 3, 0, 1]]}

with tempfile.TemporaryDirectory() as tmp:
    config = write(os.path.join(tmp, "config.json"), CONFIG)
    weights = os.path.join(tmp, "model.weights")
    common = ["--model", config, "--tokens", "96", "--weights", weights, "--timeout", "60"]
    if MODE == "ranks":
        ranks = int(sys.argv[3])
        assignment = write(os.path.join(tmp, "assignment.json"), ASSIGNMENTS[ranks])
        out = os.path.join(tmp, "prefill.json")
        result = run("--ranks", str(ranks), *common, "--assignment", assignment, "--wpr", "0,1", "--cpip", "0,1",
                     "--check", "--json", out)
        check(result.returncode == 0, f"prefill exited {result.returncode}: {result.stderr}")
        check(result.stdout.count(": pass") == 4, f"expected 4 passing checks:\n{result.stdout}")
        data = json.load(open(out))
        check(data["ranks"] == ranks and len(data["configs"]) == 4, f"JSON: {data.get('ranks')} ranks")
        for config in data["configs"]:
            for key in ("wpr", "cpip", "latency_s", "tokens_per_s", "mean_attention_spread", "layers",
                        "max_relative_error", "check_passed"):
                check(key in config, f"configs[] lacks {key}")
            check(config["check_passed"] is True, f"check failed: {config.get('max_relative_error')}")
            check(len(config["layers"]) == 2 and len(config["layers"][0]["ranks"]) == ranks, "layers x ranks")
            for key in ("attention_s", "projection_s", "mlp_s", "all_reduce_s", "prefetch_wait_s", "weight_bytes"):
                check(key in config["layers"][0]["ranks"][0], f"layer times lack {key}")
    elif MODE == "failure":
        result = run("--ranks", "3", *common, "--inject-failure", "1")
        check(result.returncode != 0, "a failing rank did not fail the job")
        check("rank 1" in result.stderr and "injected" in result.stderr,
              f"the failing rank's message is missing: {result.stderr}")
    else:
        bad_weights = write(os.path.join(tmp, "bad.weights"), "not weights")
        other = os.path.join(tmp, "other.weights")
        check(run("--ranks", "2", "--model", "tiny", "--tokens", "16", "--weights", other, "--backend",
                  "local").returncode == 0, "writing tiny's weights failed")
        bad_config = write(os.path.join(tmp, "bad_config.json"), dict(CONFIG, num_key_value_heads=3))
        missing = write(os.path.join(tmp, "missing.json"), {k: v for k, v in CONFIG.items() if k != "hidden_size"})
        bad_assignment = write(os.path.join(tmp, "bad_assignment.json"), [[0] * 8, [0] * 7 + [5]])
        short_assignment = write(os.path.join(tmp, "short_assignment.json"), [[0] * 8])
        cases = [
            (["--ranks", "-1"], "ranks"),
            (["--ranks", "9"], "ranks"),
            (["--tokens", "0"], "tokens"),
            (["--model", "gpt-9"], "model"),
            (["--model", bad_config], "num_key_value_heads"),
            (["--model", missing], "hidden_size"),
            (["--weights", bad_weights], "header"),
            (["--weights", other], "header.hidden = 256"),
            (["--weights", "/nonexistent/dir/w.bin"], "weights"),
            (["--assignment", bad_assignment], "assignment[1][7]"),
            (["--assignment", short_assignment], "assignment"),
            (["--assignment", "/nonexistent/a.json"], "/nonexistent/a.json"),
            (["--patterns", "sparse"], "patterns"),
            (["--wpr", "2"], "wpr"),
            (["--cpip", "yes"], "cpip"),
            (["--repeats", "0"], "repeats"),
            (["--backend", "gpu"], "backend"),
        ]
        for args, field in cases:
            # The case's own flags replace the common ones (CLI11 takes each option once).
            options = {"--model": config, "--tokens": "96", "--weights": weights, "--ranks": "2"}
            options.update(zip(args[::2], args[1::2], strict=True))
            result = run(*[x for pair in options.items() for x in pair])
            lines = result.stderr.strip().splitlines()
            check(result.returncode == 2, f"{args}: exit {result.returncode}, expected 2 ({result.stderr.strip()})")
            check(len(lines) == 1, f"{args}: expected one stderr line, got {lines}")
            check(field in result.stderr, f"{args}: message does not name '{field}': {result.stderr.strip()}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
