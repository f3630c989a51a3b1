from typing import Sequence

from ._core import *  # noqa: F401,F403
from ._core import Document, Mask
from .loader import PlanAheadLoader as PlanAheadLoader, PlannedBatch as PlannedBatch

def documents(lengths: Sequence[int], mask: Mask | str = "causal", first_id: int = 0) -> list[Document]: ...
