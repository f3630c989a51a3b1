"""A bounded fuzz of the plan loaders from Python, run by CI for a few seconds per loader (the libFuzzer targets
fuzz/plan_binary_fuzz.cpp and fuzz/plan_json_fuzz.cpp search deeper): mutated binary and JSON plans from the seed
corpus either raise fulcrum.InputError or load as a plan that writes back to the same plan. Never another exception
(an IndexError, a UnicodeDecodeError) and never a crash of the interpreter. Seeded and time-bounded:
FULCRUM_PLAN_FUZZ_SECONDS (default 4) per loader; a failure prints the seed and case to replay."""
import copy
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fulcrum

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "corpus"
SECONDS = float(os.environ.get("FULCRUM_PLAN_FUZZ_SECONDS", "4"))
EXTREMES = [0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 2**64 - 1]
ODD_VALUES: list[Any] = [*EXTREMES, 1.5, 1e308, -0.0, "", "x" * 300, None, True, [], {}, [0] * 3, "forward"]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # flip a few bits
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # an extreme little-endian integer somewhere
        at = rng.randrange(max(1, len(b) - 8))
        b[at : at + 8] = (rng.choice(EXTREMES) % 2**64).to_bytes(8, "little")
    elif kind == 2:  # cut it short
        del b[rng.randrange(len(b)) :]
    else:  # repeat a slice
        at = rng.randrange(len(b))
        b[at:at] = b[at : at + rng.randint(1, 64)]
    return bytes(b)


def paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:8]):
            out += paths(item, (*path, i))
    return out


def mutate_json(plan: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(plan)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths(out)[1:])
        parent = out
        for step in path[:-1]:
            parent = parent[step]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(ODD_VALUES)
    return out


def fuzz(name: str, seeds: list[Any], mutate: Callable[[Any, random.Random], Any], load: Callable[[Any], Any],
         dump: Callable[[Any], Any]) -> None:
    assert seeds, f"no {name} seeds in {CORPUS}"
    rng = random.Random(20261208)
    cases = loaded = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        case = mutate(rng.choice(seeds), rng)
        cases += 1
        try:
            plan = load(case)
        except fulcrum.InputError:
            continue
        except Exception as error:  # the finding: anything but InputError
            pytest.fail(f"{name} case {cases}: {type(error).__name__}: {error}\ninput: {case!r:.2000}")
        loaded += 1
        assert load(dump(plan)) == plan, f"{name} case {cases}: the plan it loaded does not write back the same"
    print(f"{name}: {cases} mutated plans, {loaded} loaded, {cases - loaded} refused")
    assert cases >= 50


def test_mutated_binary_plans_load_or_raise_input_error():
    seeds = [p.read_bytes() for p in sorted((CORPUS / "plan_binary").glob("*.fcpl"))]
    fuzz("binary", seeds, mutate_bytes, fulcrum.Plan.from_bytes, lambda plan: plan.to_bytes())


def test_mutated_json_plans_load_or_raise_input_error():
    seeds = [json.loads(p.read_text()) for p in sorted((CORPUS / "plan_json").glob("*.json"))
             if isinstance(json.loads(p.read_text()), dict)]
    seeds = [s for s in seeds if not any(isinstance(v, float) and math.isnan(v) for v in s.values())]
    fuzz("json", seeds, mutate_json, fulcrum.Plan.from_dict, lambda plan: plan.to_dict())
