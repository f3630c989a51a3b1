#!/usr/bin/env python3
"""`fulcrum models` and `--model FILE`, run by ctest: `models_cli_test.py PATH_TO_FULCRUM`.

The configs shipped in data/models/ read as exactly their presets; a Fulcrum model file round-trips; a
command planned with a config file prints what it prints with the preset; bad model files exit 2 naming
the field.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

FULCRUM = os.path.abspath(sys.argv[1])
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODELS = os.path.join(ROOT, "data", "models")
MODEL_SCHEMA = json.load(open(os.path.join(ROOT, "docs", "schemas", "model.schema.json")))
failures = []


def run(*args, cwd=None):
    return subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def check(condition, message):
    if not condition:
        failures.append(message)


def models_json(tmp, *files):
    out = os.path.join(tmp, "models.json")
    result = run("models", *files, "--json", out)
    check(result.returncode == 0, f"models {files}: exit {result.returncode}: {result.stderr}")
    data = json.load(open(out))
    check(data.get("schema_version") == 1, f"models --json: schema_version {data.get('schema_version')}")
    return {m["name"]: m for m in data["models"]}


def without_source(model):
    return {k: v for k, v in model.items() if k != "source"}


with tempfile.TemporaryDirectory() as tmp:
    presets = models_json(tmp)
    check(set(presets) >= {"llama3-8b", "llama-34b", "qwen2.5-3b", "tiny", "small-gqa"}, f"presets: {sorted(presets)}")
    listing = run("models")
    for name in presets:
        check(name in listing.stdout, f"`fulcrum models` does not list {name}")

    # Every preset ships as a Hugging Face config.json that reads as exactly the preset.
    shipped = sorted(glob.glob(os.path.join(MODELS, "*", "config.json")))
    check(len(shipped) == len(presets), f"data/models has {len(shipped)} configs for {len(presets)} presets")
    for name, model in models_json(tmp, *shipped).items():
        check(name in presets, f"data/models/{name}: no preset of that name")
        check(without_source(model) == without_source(presets.get(name, {})),
              f"data/models/{name}/config.json reads as {model}, the preset is {presets.get(name)}")

    # A Fulcrum model file (the --json entry plus schema_version) reads back as the same model.
    own = os.path.join(tmp, "wide.json")
    wide = dict(without_source(presets["tiny"]), name="wide", q_heads=8, kv_heads=4, schema_version=1)
    json.dump(wide, open(own, "w"))
    check(without_source(models_json(tmp, own)["wide"]) == {k: v for k, v in wide.items() if k != "schema_version"},
          "a Fulcrum model file did not round-trip")
    # docs/schemas/model.schema.json accepts every model file Fulcrum writes, and refuses what it refuses.
    for model in presets.values():
        jsonschema.validate(dict(without_source(model), schema_version=1), MODEL_SCHEMA)
    for refused in (dict(wide, heads=3), dict(wide, layers=0), {k: v for k, v in wide.items() if k != "name"}):
        check(not jsonschema.Draft202012Validator(MODEL_SCHEMA).is_valid(refused), f"the schema accepts {refused}")

    # --model FILE plans exactly as --model PRESET (from another working directory too); timing aside.
    def plan(model, cwd=None):
        out = os.path.join(tmp, "plan.json")
        result = run("plan", "--model", model, "--ranks", "4", "--tokens-per-rank", "8192", "--batches", "1",
                     "--json", out, cwd=cwd)
        check(result.returncode == 0, f"plan --model {model}: exit {result.returncode}: {result.stderr}")
        rows = json.load(open(out))["planners"] if result.returncode == 0 else {}
        return {p: {k: v for k, v in row.items() if k != "plan_ms"} for p, row in rows.items()}

    qwen = os.path.join(MODELS, "qwen2.5-3b", "config.json")
    check(plan(qwen, cwd=tmp) == plan("qwen2.5-3b"), "plan --model config.json differs from the preset's")
    check(plan(own) != plan("tiny"), "plan ignored the model file's heads")

    # Bad models: exit 2, one stderr line naming the field.
    def bad(text, field, name="bad.json"):
        path = os.path.join(tmp, name)
        open(path, "w").write(text)
        for args in (["models", path], ["plan", "--model", path, "--batches", "1"]):
            result = run(*args)
            lines = result.stderr.strip().splitlines()
            check(result.returncode == 2 and len(lines) == 1 and field in result.stderr,
                  f"{args} with {text}: exit {result.returncode}, stderr {result.stderr.strip()!r}, expected '{field}'")

    hf = json.load(open(qwen))
    bad(json.dumps(dict(hf, torch_dtype="int8")),
        'model.torch_dtype = "int8": must be one of bfloat16, float16, float32')
    bad(json.dumps(dict(hf, num_key_value_heads=3)), "model.num_key_value_heads = 3")
    bad(json.dumps({"vocab_size": 10}), "neither a Hugging Face config.json")
    bad(json.dumps(dict(wide, heads=3)), "model.heads: unknown field")
    bad(json.dumps(dict(wide, schema_version=2)), "model.schema_version = 2")
    bad(json.dumps(dict(wide, q_heads=6)), "kv_heads = 4: must divide q_heads = 6")
    bad("{not json", "bad.json")
    result = run("plan", "--model", "llama-8b", "--batches", "1")
    check(result.returncode == 2 and "model = 'llama-8b'" in result.stderr and "llama3-8b" in result.stderr,
          f"an unknown preset: {result.stderr.strip()!r}")
    result = run("models", os.path.join(tmp, "missing.json"))
    check(result.returncode == 2 and "missing.json" in result.stderr, f"a missing file: {result.stderr.strip()!r}")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
