"""Shared fixtures: a small model, a batch with a document split across ranks, and its plans."""
import os

import pytest

import fulcrum


def pytest_configure(config: pytest.Config) -> None:
    """Fulcrum's Triton kernels run on CPU tensors only interpreted, and triton.jit fixes that when the kernel module
    is imported: set before any test module is, and inherited by the gloo tests' processes. A hook, not an import
    side effect: scripts that import this file's helpers (bench/gpu_torch_check.py) keep the compiled kernels."""
    os.environ.setdefault("TRITON_INTERPRET", "1")


RANKS = 4
TOKENS_PER_RANK = 2048


@pytest.fixture(scope="session")
def model():
    return fulcrum.model_shape("llama3-8b")


@pytest.fixture(scope="session")
def batch():
    # One long document over three ranks, short ones on the last: DistCA must move attention shards.
    return fulcrum.pack_batch(fulcrum.documents([6000, 300, 500, 400, 600, 200, 192]), RANKS, TOKENS_PER_RANK)


@pytest.fixture(scope="session")
def assignment(model, batch):
    return fulcrum.make_planner("distca", fulcrum.PlannerOptions(model)).plan(batch)


# A batch whose DistCA plan takes ~0.1 s on this project's 2-core machines (many ranks, fine shards): long
# enough to see, in wall time, whether planning overlaps Python work and whether it holds the GIL.
HEAVY_RANKS, HEAVY_TOKENS = 1024, 16384


def heavy_lengths(seed):
    source = fulcrum.make_length_source("uniform:100:4000", seed=seed, tokens_per_rank=HEAVY_TOKENS)
    capacity, lengths = HEAVY_RANKS * HEAVY_TOKENS, []
    while sum(lengths) < capacity:  # exactly fills the batch: the last length is cut to fit (pack_batch drops nothing)
        lengths.append(min(int(source.next()), capacity - sum(lengths)))
    return lengths


def heavy_options():
    return fulcrum.PlannerOptions(fulcrum.model_shape("llama3-8b"), tolerance=0.01, granularity=16)


def whole_stripes(planner: fulcrum.Planner, batch: fulcrum.Batch) -> fulcrum.Batch:
    """``batch`` for ``planner``: unchanged, or for striped layouts (which take documents of whole stripes,
    other lengths being bad input) every document cut to whole stripes and packed again."""
    multiple = planner.document_length_multiple(batch.ranks)
    if multiple == 1:
        return batch
    docs = []
    for d in batch.documents:
        if d.length >= multiple:
            doc = fulcrum.Document(d.id, d.length // multiple * multiple, d.mask)
            doc.head_masks = list(d.head_masks)
            docs.append(doc)
    docs = docs or [fulcrum.Document(0, multiple)]
    total = sum(d.length for d in docs)
    return fulcrum.pack_batch(docs, batch.ranks, max(batch.tokens_per_rank, -(-total // batch.ranks)))
