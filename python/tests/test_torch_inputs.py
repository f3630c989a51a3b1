"""fulcrum.torch refuses bad input with fulcrum.InputError naming the argument, before any traffic.

One process: a gloo group of size 1 and plans for 1 rank (and one for 2 ranks, for the group check).
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")
import fulcrum.torch as ft  # noqa: E402
import torch.distributed as dist  # noqa: E402
from fulcrum.torch.backend_fulcrum import FulcrumBackend  # noqa: E402
from fulcrum.torch.function import _check_group_moves  # noqa: E402

import fulcrum  # noqa: E402

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package


def model_shape() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "test-gqa", 1, 64, 256
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = 4, 2, 16, 4
    return m


def step_for(ranks: int, **kwargs) -> ft.StepPlan:
    batch = fulcrum.pack_batch(fulcrum.documents([40, 60, 28]), ranks, 128 // ranks)
    options = fulcrum.PlannerOptions(model_shape(), granularity=16)
    assignment = fulcrum.make_planner("distca", options).plan(batch)
    return ft.compile_step(assignment, model_shape(), **kwargs)


def raises(message: str):
    """Expects fulcrum.InputError whose message contains ``message`` verbatim."""
    return pytest.raises(fulcrum.InputError, match=re.escape(message))


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield None  # the default group
    dist.destroy_process_group()


@pytest.fixture
def inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(128, h, 16, generator=g, requires_grad=True) for h in (4, 2, 2)]


def test_valid_inputs_run_forward_and_backward(group, inputs):
    step = step_for(1)
    assert step.rows(0) == 128 and step.ranks == 1 and (step.q_heads, step.kv_heads, step.head_dim) == (4, 2, 16)
    o, lse = ft.attention(*inputs, step, group, return_lse=True)
    assert o.shape == (128, 4, 16) and lse.shape == (4, 128) and not lse.requires_grad
    o.sum().backward()
    assert all(t.grad is not None and t.grad.shape == t.shape for t in inputs)


@pytest.mark.parametrize(("argument", "bad", "message"), [
    (0, lambda t: t[:100], "q: shape (100, 4, 16) does not match the plan: rank 0 owns 128 rows of 4 heads x 16"),
    (1, lambda t: t.reshape(128, 1, 32), "k: shape (128, 1, 32) does not match the plan"),
    (2, lambda t: t.double(), "v: dtype torch.float64 is not the plan's torch.float32"),
    (0, lambda t: t.bfloat16(), "q: dtype torch.bfloat16 is not the plan's torch.float32"),
    (1, lambda t: t.detach().to("meta"), "k: device meta differs from q's device cpu"),
    (0, lambda t: t.detach().numpy(), "q: a ndarray, not a torch.Tensor"),
])
def test_bad_tensors_name_the_argument(group, inputs, argument, bad, message):
    inputs[argument] = bad(inputs[argument])
    with raises(message):
        ft.attention(*inputs, step_for(1), group)


def test_a_plan_for_another_world_size_names_the_group(group, inputs):
    with raises("group: 1 processes, but the plan is for 2 ranks"):
        ft.attention(*inputs, step_for(2), group)
    with raises("group: a str, not a torch.distributed.ProcessGroup (or None)"):
        ft.attention(*inputs, step_for(1), "x")


def test_bad_backend_scale_and_step_name_themselves(group, inputs):
    with raises("backend = 'cuda': must be one of auto, fulcrum, torch, flash"):
        ft.attention(*inputs, step_for(1), group, backend="cuda")
    with raises("backend = 'flash': needs flash-attn installed and CUDA"):
        ft.attention(*inputs, step_for(1), group, backend="flash")
    with raises("softmax_scale = -1.0: must be a finite number > 0"):
        ft.attention(*inputs, step_for(1), group, softmax_scale=-1.0)
    with raises("step: a Plan, not a fulcrum.torch.StepPlan"):
        ft.attention(*inputs, step_for(1).forward_plan, group)


class CountingBackend:
    """A backend object of the caller's: counts the calls and passes them to the fulcrum kernels."""

    name = "counting"

    def __init__(self) -> None:
        self.inner, self.calls = FulcrumBackend(), []

    def forward(self, plan, op, buffers, scale):
        self.calls.append("forward")
        self.inner.forward(plan, op, buffers, scale)

    def backward(self, plan, op, buffers, scale):
        self.calls.append("backward")
        self.inner.backward(plan, op, buffers, scale)


def test_a_backend_object_runs_the_kernel_calls(group, inputs):
    counting = CountingBackend()
    o = ft.attention(*inputs, step_for(1), group, backend=counting)
    forward_calls = len(counting.calls)  # one per fused Attention instruction (two nano-batches: two)
    assert forward_calls >= 1 and set(counting.calls) == {"forward"}
    o.sum().backward()
    assert len(counting.calls) > forward_calls and set(counting.calls[forward_calls:]) == {"backward"}
    assert torch.equal(o, ft.attention(*inputs, step_for(1), group, backend="fulcrum"))
    with raises("backend: a object, neither a name (auto, fulcrum, torch, flash, fa2, triton) nor a kernel backend"):
        ft.attention(*inputs, step_for(1), group, backend=object())


@pytest.mark.parametrize("backend, device, message", [
    ("gloo", "cuda", "group: gloo cannot send CUDA tensors point to point; use an NCCL group for CUDA tensors, "
                     "or transport='staged'"),
    ("nccl", "cpu", "group: NCCL moves CUDA tensors only; these are on cpu"),
    ("cpu:gloo,cuda:nccl", "mps", "group: its backend 'cpu:gloo,cuda:nccl' has none for mps tensors"),
    ("cpu:nccl,cuda:gloo", "cuda", "group: gloo cannot send CUDA tensors"),
])
def test_a_group_that_cannot_move_the_tensors_names_the_group(backend, device, message):
    # Checked from dist.get_backend's string: a group of two whose backend cannot send these tensors point to
    # point would otherwise fail inside its first batch_isend_irecv (gloo with CUDA tensors: "writev: Bad address").
    with raises(message):
        _check_group_moves(backend, device)
    for fine_backend, fine_device in (("gloo", "cpu"), ("nccl", "cuda"), ("cpu:gloo,cuda:nccl", "cpu"),
                                      ("cpu:gloo,cuda:nccl", "cuda")):
        _check_group_moves(fine_backend, fine_device)


def test_the_staged_transport_sends_host_memory_so_gloo_carries_cuda_tensors():
    _check_group_moves("gloo", "cuda", "staged")  # several processes on one GPU: what it is for
    _check_group_moves("cpu:gloo,cuda:nccl", "cuda", "staged")
    with raises("group: NCCL moves CUDA tensors only; transport='staged' sends host memory (use a gloo group)"):
        _check_group_moves("nccl", "cuda", "staged")
    with raises("transport = 'pinned': must be one of direct, staged"):
        ft.PingPong([torch.nn.Identity()], transport="pinned")


def test_compile_step_refuses_what_it_cannot_run():
    with raises("dtype = torch.float16: must be torch.float32 or torch.bfloat16"):
        step_for(1, dtype=torch.float16)
    with raises("mode = 'signal'"):
        step_for(1, mode="signal")
    step = step_for(1)
    with raises("StepPlan(forward, backward): got a backward and a forward"):
        ft.StepPlan(step.backward_plan, step.forward_plan)
    with raises("rank = 1: must be in [0, 1)"):
        step.owned(1)


def test_a_step_plan_from_bytes_runs_only_once_verified():
    """Plans shared as bytes (rank 0's plans sent to the others) are verified before they run: a corrupt one is
    InputError naming verify_plan; intact ones build the same StepPlan as the compiled plans."""
    step = step_for(2)
    forward, backward = step.forward_plan.to_bytes(), step.backward_plan.to_bytes()
    same = ft.StepPlan(fulcrum.Plan.from_bytes(forward), fulcrum.Plan.from_bytes(backward))
    assert same.rows(0) == step.rows(0) and same.owned(1) == step.owned(1)
    data = step.forward_plan.to_dict()
    data["programs"][1]["instructions"] = []  # rank 1 never sends: messages unmatched, outputs missing
    with raises("forward plan: fails verify_plan, so it is not run"):
        ft.StepPlan(fulcrum.Plan.from_dict(data), fulcrum.Plan.from_bytes(backward))


def test_import_fulcrum_does_not_import_torch():
    # torch is the optional extra: only `import fulcrum.torch` may load it.
    code = "import sys, fulcrum; assert 'torch' not in sys.modules, 'import fulcrum loaded torch'"
    subprocess.run([sys.executable, "-c", code], check=True)
