"""``AutoPlanner``: auto as a planner object, for ``PlanAheadLoader`` and training loops.

Each ``plan(batch)`` asks ``fulcrum.choose_plan`` for the candidate whose plan simulates fastest on the
hardware model and returns that plan; ``choices`` keeps every batch's choice (chosen, runner-up, their
simulated seconds, planning time per candidate) so a loop can log what ran and why.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _core


class AutoPlanner:
    """Chooses a strategy per batch by simulated time (``fulcrum.choose_plan``)."""

    name = "auto"

    def __init__(
        self,
        options: _core.PlannerOptions,
        hardware: str | _core.HardwareModel = "h200-dgx",
        *,
        candidates: Sequence[str] = (),
        tp: int = 1,
        mode: str = "pingpong",
        baseline_mode: str = "single-stream",
    ) -> None:
        self._options = options
        self._hardware = _core.hardware(hardware) if isinstance(hardware, str) else hardware
        self._kwargs: dict[str, Any] = dict(candidates=list(candidates), tp=tp, mode=mode,
                                            baseline_mode=baseline_mode)
        # Bad candidates or modes fail here, when the planner is made, not at the first batch.
        _core.choose_plan(_core.pack_batch([], 1, 1), options, self._hardware, **self._kwargs)
        self.choices: list[dict[str, Any]] = []

    def plan(self, batch: _core.Batch) -> _core.Assignment:
        choice = _core.choose_plan(batch, self._options, self._hardware, **self._kwargs)
        assignment: _core.Assignment = choice.pop("assignment")
        self.choices.append(choice)
        return assignment
