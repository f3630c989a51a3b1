"""Fulcrum for PyTorch users: plan distributed core attention from Python.

The compiled engine lives in ``fulcrum._core`` (workloads, planners, verifier, compiler, cost model,
simulator, CPU kernels); this package re-exports it and adds the pure-Python pieces a training loop
needs: ``documents`` to turn length lists into documents, and ``PlanAheadLoader``, which plans the next
batches on a worker thread while the current one trains.

Errors from the engine raise ``fulcrum.Error`` (a RuntimeError) with the engine's message; bad input
raises its subclass ``fulcrum.InputError``, which is also a ValueError.
"""
from ._core import *  # noqa: F403  (the binding's names are the package's API)
from ._core import Document, Mask
from .auto import AutoPlanner as AutoPlanner
from .loader import PlanAheadLoader as PlanAheadLoader
from .loader import PlannedBatch as PlannedBatch
from .tensors import attention_backward as attention_backward
from .tensors import attention_forward as attention_forward

__all__ = [name for name in dir() if not name.startswith("_")]


def documents(lengths, mask="causal", first_id=0):
    """One Document per length, with consecutive ids from ``first_id`` and the same mask."""
    spec = mask if isinstance(mask, Mask) else Mask(mask)
    return [Document(first_id + i, int(length), spec) for i, length in enumerate(lengths)]
