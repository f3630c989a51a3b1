from collections.abc import Sequence

from ._core import *  # noqa: F403
from ._core import Document, Mask
from .loader import PlanAheadLoader as PlanAheadLoader
from .loader import PlannedBatch as PlannedBatch
from .tensors import attention_backward as attention_backward
from .tensors import attention_forward as attention_forward

def documents(lengths: Sequence[int], mask: Mask | str = "causal", first_id: int = 0) -> list[Document]: ...
