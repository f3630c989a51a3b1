#!/usr/bin/env python3
"""`fulcrum prefill` on real MPI processes, run by ctest.

  prefill_test.py FULCRUM ranks N    a Llama-shaped model from a config.json (8 q heads in 2 GQA groups), mixed
                                     head patterns, an assignment with uneven head counts and split KV groups,
                                     WPR and CPIP on and off side by side: every configuration equals the fp64
                                     reference (--check, max relative error 1e-5); JSON has the documented keys
                                     Then every head solver side by side (--solver all of them) on the mixed
                                     report: each equals the reference, its assignment is in the JSON with the
                                     predicted T_layer, uniform is Megatron's blocks, some solver splits a group
  prefill_test.py FULCRUM profile    `profile --heads` on a small pattern file (every kind), its profile read by
                                     `heads --profile` and by `prefill --profile --check` on 2 ranks
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


def run(*args, timeout=300, command="prefill"):
    return subprocess.run([FULCRUM, command, *args], capture_output=True, text=True, timeout=timeout)


def solvers():
    """The registered head solvers, from `fulcrum heads --help` (the --solvers default lists them all)."""
    text = run("--help", command="heads").stdout
    line = next(x for x in text.splitlines() if "--solvers" in x)
    return line.split("=", 1)[1].split()[0].split(",")


def splits_a_group(layer, group_size=4):
    return any(len(set(layer[g:g + group_size])) > 1 for g in range(0, len(layer), group_size))


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
            check(config["solver"] == assignment and config["layers"][1]["assignment"] == ASSIGNMENTS[ranks][1],
                  f"the file's assignment is not reported: {config['solver']}")
        # Every solver's assignment of the mixed report (kinds cycling over heads, per layer), side by side.
        names = solvers()
        check(len(names) >= 7 and "lpt-ls" in names and "uniform" in names, f"solvers: {names}")
        result = run("--ranks", str(ranks), *common, "--solver", ",".join(names), "--check", "--json", out)
        check(result.returncode == 0, f"prefill --solver exited {result.returncode}: {result.stderr}")
        check(result.stdout.count(": pass") == len(names), f"expected {len(names)} passing checks:\n{result.stdout}")
        data = json.load(open(out))
        check([c["solver"] for c in data["configs"]] == names, "one configuration per solver, in order")
        split = False
        for config in data["configs"]:
            check(config["check_passed"] is True, f"{config['solver']}: check failed")
            for layer in config["layers"]:
                for key in ("predicted_layer_s", "predicted_rank_s", "predicted_spread", "lower_bound_s"):
                    check(key in layer, f"{config['solver']}: layers[] lacks {key}")
                check(layer["predicted_layer_s"] >= layer["lower_bound_s"] * (1 - 1e-9), "prediction under the bound")
                check(len(layer["predicted_rank_s"]) == ranks and len(layer["assignment"]) == 8, "per rank / head")
                check(all(0 <= r < ranks for r in layer["assignment"]), f"assignment {layer['assignment']}")
                split = split or splits_a_group(layer["assignment"])
            if config["solver"] == "uniform":
                blocks = [h * ranks // 8 for h in range(8)]
                check(all(layer["assignment"] == blocks for layer in config["layers"]), "uniform is not Megatron's")
        check(split, "no solver split a GQA group: the acceptance case is not covered")
        # The default solver is ours (thread ranks: no second mpiexec start).
        result = run("--ranks", str(ranks), *common, "--backend", "local", "--json", out)
        check(result.returncode == 0 and json.load(open(out))["configs"][0]["solver"] == "lpt-ls",
              f"default solver: {result.stderr}")
    elif MODE == "profile":
        # Every pattern kind, in a report for the 8-head model; small lengths so it takes a second.
        kinds = [{"kind": "full"}, {"kind": "a-shape", "sink": 4, "window": 16},
                 {"kind": "vertical-slash", "verticals": 8, "slashes": 12},
                 {"kind": "block-sparse", "block": 16, "blocks": 2},
                 {"kind": "block-sparse", "block": 16, "density": 0.5}]
        heads = [kinds[h % 5] for h in range(8)]
        patterns = write(os.path.join(tmp, "patterns.json"),
                         {"q_heads": 8, "kv_heads": 2, "layers": [{"heads": heads}, {"heads": heads[::-1]}]})
        profile = os.path.join(tmp, "heads_profile.json")
        result = run("--heads", "--model", config, "--patterns", patterns, "--prompt-tokens", "64,96,128",
                     "--repeats", "1", "--threads", "1", "--json", profile, command="profile")
        check(result.returncode == 0, f"profile --heads exited {result.returncode}: {result.stderr}")
        data = json.load(open(profile))
        check(data["prompt_tokens"] == [64, 96, 128], f"grid: {data.get('prompt_tokens')}")
        keys = {"full", "a-shape:4:16", "vertical-slash:8:12", "block-sparse:16:blocks=2",
                "block-sparse:16:density=0.5"}
        check(set(data["attention_s"]) == keys, f"keys: {sorted(data['attention_s'])}")
        check(all(len(v) == 3 and min(v) > 0 for v in data["attention_s"].values()), "one time per length")
        check(all(a >= b > 0 for a, b in zip(data["t_qkvo_s"], data["t_qo_s"], strict=True)), "t_qkvo >= t_qo > 0")
        result = run("--patterns", patterns, "--devices", "2", "--tokens", "80", "--profile", profile,
                     "--solvers", "uniform,lpt-ls", command="heads")
        check(result.returncode == 0, f"heads --profile exited {result.returncode}: {result.stderr}")
        check(f"costs {profile}" in result.stdout, f"heads did not use the profile:\n{result.stdout}")
        out = os.path.join(tmp, "prefill.json")
        result = run("--ranks", "2", *common, "--patterns", patterns, "--profile", profile, "--solver",
                     "uniform,lpt-ls", "--check", "--json", out)
        check(result.returncode == 0, f"prefill --profile exited {result.returncode}: {result.stderr}")
        check(result.stdout.count(": pass") == 2, f"expected 2 passing checks:\n{result.stdout}")
        check(json.load(open(out))["costs"] == profile, "prefill did not use the profile")
        # Outside the profile's grid (no extrapolation): bad input naming the length.
        longer = [("200" if a == "96" else a) for a in common]
        result = run("--ranks", "2", *longer, "--patterns", patterns, "--profile", profile)
        check(result.returncode == 2 and "prompt tokens = 200" in result.stderr, f"outside the grid: {result.stderr}")
        for args, field in [(["--heads", "--prompt-tokens", "64,32"], "prompt tokens[1] = 32"),
                            (["--heads", "--patterns", patterns], "patterns.q_heads = 8"),  # small-gqa has 16
                            (["--heads", "--head-dim", "64"], "--head-dim"),
                            (["--model", "tiny"], "--heads")]:
            result = run(*args, "--json", os.path.join(tmp, "x.json"), command="profile")
            lines = result.stderr.strip().splitlines()
            check(result.returncode == 2 and len(lines) == 1 and field in result.stderr,
                  f"profile {args}: exit {result.returncode}, {lines}")
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
        good_assignment = write(os.path.join(tmp, "good_assignment.json"), [[0] * 8, [1] * 8])
        heads4 = [{"kind": "full"}] * 4
        four_heads = write(os.path.join(tmp, "four_heads.json"),
                           {"q_heads": 4, "kv_heads": 2, "layers": [{"heads": heads4}, {"heads": heads4}]})
        one_layer = write(os.path.join(tmp, "one_layer.json"),
                          {"q_heads": 8, "kv_heads": 2, "layers": [{"heads": [{"kind": "full"}] * 8}]})
        only_full = write(os.path.join(tmp, "only_full.json"),
                          {"prompt_tokens": [64, 128], "t_qkvo_s": [2e-6, 4e-6], "t_qo_s": [1e-6, 2e-6],
                           "attention_s": {"full": [1e-5, 4e-5]}})
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
            (["--patterns", "sparse"], "sparse"),
            (["--patterns", four_heads], "patterns.q_heads = 4"),
            (["--patterns", one_layer], "patterns.layers = 1"),
            (["--solver", "magic"], "solver = 'magic'"),
            (["--solver", "uniform,"], "solver"),
            (["--solver", "lpt-ls", "--assignment", good_assignment], "give one of --solver and --assignment"),
            (["--ranks", "9", "--solver", "lpt-ls"], "ranks = 9"),
            (["--profile", "/nonexistent/profile.json"], "/nonexistent/profile.json"),
            (["--profile", only_full], "not in the runtime profile"),
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
