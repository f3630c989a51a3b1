#!/usr/bin/env python3
"""The published JSON Schemas (docs/schemas/) against real outputs, run by ctest:
`schemas_test.py PATH_TO_FULCRUM`.

Each `--json` the CLI writes (plan, run, simulate) validates against its schema, and so does the bundled
hardware file; each schema refuses the output with a required key removed or a value of the wrong type, so
a schema that accepts anything fails here.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

FULCRUM = os.path.abspath(sys.argv[1])
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCHEMAS = os.path.join(ROOT, "docs", "schemas")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def schema(name):
    s = json.load(open(os.path.join(SCHEMAS, f"{name}.schema.json")))
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def written(tmp, *args):
    out = os.path.join(tmp, "out.json")
    result = subprocess.run([FULCRUM, *args, "--json", out], capture_output=True, text=True, timeout=600)
    check(result.returncode == 0, f"{args}: exit {result.returncode}: {result.stderr[-2000:]}")
    return json.load(open(out)) if result.returncode == 0 else None


def validates(name, document, what):
    validator = schema(name)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    check(not errors, f"{what} does not match docs/schemas/{name}.schema.json: {errors[:5]}")
    # The schema can fail: a required key gone, a number turned into a string.
    for key in [k for k in validator.schema["required"] if k != "schema_version"][:3]:
        broken = copy.deepcopy(document)
        del broken[key]
        check(not validator.is_valid(broken), f"{name}.schema.json accepts {what} without {key}")
    broken = copy.deepcopy(document)
    broken["schema_version"] = "1"
    check(not validator.is_valid(broken), f"{name}.schema.json accepts a string schema_version")


with tempfile.TemporaryDirectory() as tmp:
    plan = written(tmp, "plan", "--ranks", "4", "--tokens-per-rank", "8192", "--batches", "2",
                   "--planners", "distca,dcp,packed,perdoc-cp,wlb,auto")
    if plan:
        validates("plan", plan, "plan --json")
        check(isinstance(plan["config"]["options"]["dcp_block"], int), "plan options: dcp_block is not an integer")
    simulate = written(tmp, "simulate", "--gpus", "16", "--max-doc-len", "16384", "--iterations", "2",
                       "--planners", "distca,wlb,packed,auto", "--modes", "pingpong,signal", "--sweep", "pp=1,2")
    if simulate:
        validates("simulate", simulate, "simulate --json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = os.path.join(tmp, "run.json")
    result = subprocess.run([FULCRUM, "run", "--backend", "local", "--ranks", "2", "--tokens-per-rank", "2048",
                             "--modes", "pingpong,signal", "--json", out], capture_output=True, text=True,
                            timeout=600, env=env)
    check(result.returncode == 0, f"run: exit {result.returncode}: {result.stderr[-2000:]}")
    if result.returncode == 0:
        run = json.load(open(out))
        validates("run", run, "run --json")
        check(all(isinstance(r["bytes_sent"], int) for r in run["runs"][0]["per_rank"]), "bytes_sent not integers")
    validates("hardware", json.load(open(os.path.join(ROOT, "data", "hardware", "cpu-local.json"))),
              "data/hardware/cpu-local.json")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
