"""bench/distca_traffic.py's relay estimate (relay_imbalance) on hand-made plans whose answers are worked out here.

Bytes per token: Q 1, K/V 2, O+LSE 3 (by TensorKind), so every count below is small and exact.
"""
from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
PER_TOKEN = {0: 1, 1: 2, 2: 3}
Q, KV, OUT = 0, 1, 2


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distca_traffic", ROOT / "bench" / "distca_traffic.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["distca_traffic"] = module
    spec.loader.exec_module(module)
    return module


traffic = load_script()


def transfer(kind: int, src: int, dst: int, begin: int, end: int, doc: int = 0) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, doc=doc, src=src, dst=dst, tokens=(begin, end))


def imbalance(per_rank: list[int]) -> float:
    return max(per_rank) / statistics.fmean(per_rank)


def fan_out() -> SimpleNamespace:
    """Owner 0 sends keys [0, 100) to 1, 2 and 3 (200 bytes each); rank 1 sends 10 Q rows to 2 and gets O back."""
    return SimpleNamespace(transfers=[transfer(KV, 0, d, 0, 100) for d in (1, 2, 3)]
                           + [transfer(Q, 1, 2, 0, 10), transfer(OUT, 2, 1, 0, 10)])


def test_one_hop_is_the_plan_as_it_is():
    plan = fan_out()
    # Sent + received: rank 0 600; 1: 200 + 10 + 30; 2: 200 + 10 + 30; 3: 200.
    assert traffic.relay_imbalance(plan, PER_TOKEN, 4, max_hops=1) == imbalance([600, 240, 240, 200])


def test_a_relay_moves_sends_to_the_least_busy_holder_and_keeps_the_total():
    plan = fan_out()
    # Q and O first: 1 and 2 at 40. Then K/V, largest ranges first, ties in plan order: 0 -> 1 (only the owner
    # holds the keys): 0 200, 1 240. To 2: owner 200 < rank 1 240, so 0 sends: 0 400, 2 240. To 3: rank 1
    # and 2 (240) are the least busy holders within 2 hops, 1 first: 1 440, 3 200. Total 1,280 as in the plan.
    assert traffic.relay_imbalance(plan, PER_TOKEN, 4, max_hops=2) == imbalance([400, 440, 240, 200])
    # Nested keys: 1 gets [0, 100), 2 and 3 get [0, 50). 0 -> 1 (0 200, 1 200); to 2 the tie goes to the
    # owner, first in the list (0 300, 2 100); to 3 rank 2 (100) forwards: 2 200, 3 100.
    nested = SimpleNamespace(transfers=[transfer(KV, 0, 1, 0, 100), transfer(KV, 0, 2, 0, 50),
                                        transfer(KV, 0, 3, 0, 50)])
    assert traffic.relay_imbalance(nested, PER_TOKEN, 4, max_hops=1) == imbalance([400, 200, 100, 100])
    assert traffic.relay_imbalance(nested, PER_TOKEN, 4, max_hops=2) == imbalance([300, 200, 200, 100])


def test_a_relay_only_forwards_keys_the_holder_has():
    # 0 sends 10 Q rows to 3 first, so after 0 -> 1 [0, 100) rank 1 (200) is idler than the owner (210).
    def plan(second: tuple[int, int]) -> SimpleNamespace:
        return SimpleNamespace(transfers=[transfer(Q, 0, 3, 0, 10), transfer(KV, 0, 1, 0, 100),
                                          transfer(KV, 0, 2, *second)])
    # [50, 100) is inside what 1 holds: 1 forwards it (1 300, 2 100).
    assert traffic.relay_imbalance(plan((50, 100)), PER_TOKEN, 4, max_hops=5) == imbalance([210, 300, 100, 10])
    # [50, 140) is not: the owner sends it although 1 is idler (0 390, 2 180).
    assert traffic.relay_imbalance(plan((50, 140)), PER_TOKEN, 4, max_hops=5) == imbalance([390, 200, 180, 10])
