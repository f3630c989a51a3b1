"""fulcrum.torch.PingPong on real gloo groups: the layer schedule's results, its order, and its refusals.

A small Llama-like stack (RMSNorm, Q/K/V projections, RoPE, GQA attention, O projection, SwiGLU MLP, two
residuals; 2 layers, hidden 64, 4 q heads over 2 kv heads of 16) runs on a random micro-batch of whole
documents per rank, as two nano-batches planned by distca, on 2 and 4 processes, with both schedules.
Each rank checks its output rows, the gradient of its input rows, and (summed over ranks) every parameter's
gradient against the same layers run here in fp64, one document at a time, with attention written here
(masked softmax, no fulcrum code). Tolerance: |error| <= 1e-5 * max |reference| per tensor (fp32).

Also: the resumable executor (ProgramRun, two runs interleaved on two tag lanes) gives bitwise the same
O and LSE as run_program; ping-pong and sequential give bitwise the same output; python/examples/
llama_model.py's blocks, wrapped in a ten-line adapter (LlamaBlock), give under PingPong what the model's
own forward gives with single-process attention (1e-5 relative, fp32 against fp32); the order in which the
forward and backward schedules run compute and instructions is the designed one (event logs); and bad
input raises fulcrum.InputError naming the argument.
"""
from __future__ import annotations

import copy
import math
import random
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")
import fulcrum.torch as ft  # noqa: E402
import torch.distributed as dist  # noqa: E402
from fulcrum.torch.comm import GroupComm  # noqa: E402
from fulcrum.torch.executor import ProgramRun, run_program  # noqa: E402
from fulcrum.torch.packed import PackedRows, Piece, reference_attention  # noqa: E402
from fulcrum.torch.split_attention import InFlight  # noqa: E402
from gloo_group import run_on_gloo  # noqa: E402
from torch import nn  # noqa: E402

import fulcrum  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import llama_model  # noqa: E402

HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 64, 4, 2, 16, 128, 2
TOLERANCE = 1e-5


def model_shape() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "test-pingpong", LAYERS, HIDDEN, FFN
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = Q_HEADS, KV_HEADS, HEAD_DIM, 4
    return m


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None]


class Layer(nn.Module):
    """A Llama decoder layer split at attention (the PingPongLayer protocol). context = (cos, sin, log):
    the nano-batch's RoPE angles and, in the schedule tests, a list its calls are logged to."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
        self.norm1, self.norm2 = nn.RMSNorm(HIDDEN, eps=1e-5), nn.RMSNorm(HIDDEN, eps=1e-5)
        self.q = nn.Linear(HIDDEN, Q_HEADS * HEAD_DIM, bias=False)
        self.k = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o = nn.Linear(Q_HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.gate, self.up = nn.Linear(HIDDEN, FFN, bias=False), nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def _log(self, context, event: str, tensor=None) -> None:
        log, label = context[2], context[3]
        if log is None:
            return
        name = f"{label}{self.index} {event}"
        if tensor is None:
            log.append(name)
        elif tensor.requires_grad:
            tensor.register_hook(lambda g: log.append(name))

    def pre_attention(self, x, context):
        cos, sin = context[0], context[1]
        self._log(context, "pre")
        self._log(context, "pre backward", x)  # x's gradient exists once this part's backward has run
        h, rows = self.norm1(x), x.shape[0]
        q = rope(self.q(h).view(rows, Q_HEADS, HEAD_DIM), cos, sin)
        k = rope(self.k(h).view(rows, KV_HEADS, HEAD_DIM), cos, sin)
        return q.contiguous(), k.contiguous(), self.v(h).view(rows, KV_HEADS, HEAD_DIM), x

    def post_attention(self, o, x, context):
        self._log(context, "post")
        self._log(context, "post backward", o)
        x = x + self.o(o.flatten(1))
        h = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


def make_layers() -> list[Layer]:
    torch.manual_seed(7)
    layers = [Layer(i) for i in range(LAYERS)]
    for layer in layers:  # RMSNorm weights away from 1, so that a wrong norm would show
        for norm in (layer.norm1, layer.norm2):
            nn.init.uniform_(norm.weight, 0.5, 1.5)
    return layers


def rope_context(cu: list[int], dtype=torch.float32, log=None, label=""):
    positions = torch.cat([torch.arange(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)] + [torch.zeros(0)])
    frequency = 10000.0 ** -(torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    angles = positions.double()[:, None] * frequency[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype), log, label


def cu_seqlens(world: int, seed: int) -> list[list[int]]:
    """Each rank's whole documents (1 to 6 of them, short and long): an imbalanced micro-batch."""
    rng = random.Random(seed)
    out = []
    for _ in range(world):
        cu = [0]
        for _ in range(rng.randint(1, 6)):
            cu.append(cu[-1] + rng.choice([rng.randint(3, 40), rng.randint(60, 200)]))
        out.append(cu)
    return out


def plan_steps(world: int):
    """The two nano-batches' StepPlans of the test's micro-batch (every process plans the same)."""
    planner = fulcrum.make_planner("distca", fulcrum.PlannerOptions(model_shape(), granularity=16, tolerance=0.05))
    return ft.plan_nano_batches(planner, cu_seqlens(world, seed=world), model_shape())


def rank_data(rank: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(rows, HIDDEN, generator=g), torch.randn(rows, HIDDEN, generator=g)


def document_attention(q, k, v):
    """Causal GQA attention over one document, written out (fp64 in the reference)."""
    n = q.shape[0]
    k, v = (t.repeat_interleave(Q_HEADS // KV_HEADS, 1) for t in (k, v))
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


def reference(layers: list[Layer], per_rank_cu: list[list[int]]):
    """Per rank: output rows and input gradient; and the parameters' gradients; all fp64, per document."""
    layers64 = [copy.deepcopy(layer).double() for layer in layers]
    outputs, input_grads = [], []
    for rank, cu in enumerate(per_rank_cu):
        x, g = (t.double() for t in rank_data(rank, cu[-1]))
        x.requires_grad_()
        cos, sin, _, _ = rope_context(cu, torch.float64)
        pieces = []
        for d in range(len(cu) - 1):
            rows = slice(cu[d], cu[d + 1])
            h, context = x[rows], (cos[rows], sin[rows], None, "")
            for layer in layers64:
                q, k, v, saved = layer.pre_attention(h, context)
                h = layer.post_attention(document_attention(q, k, v), saved, context)
            pieces.append(h)
        y = torch.cat(pieces) if pieces else torch.zeros(0, HIDDEN, dtype=torch.float64)
        (y * g).sum().backward()
        outputs.append(y.detach())
        input_grads.append(x.grad if x.grad is not None else torch.zeros_like(x))
    params = [p.grad for layer in layers64 for p in layer.parameters()]
    return outputs, input_grads, params


def compare(name: str, got: torch.Tensor, want: torch.Tensor) -> list[str]:
    error = (got.double() - want).abs().max().item() if want.numel() else 0.0
    bound = TOLERANCE * max(want.abs().max().item() if want.numel() else 0.0, 1e-30)
    return [] if error <= bound else [f"{name}: |error| {error:.2e} > {bound:.2e}"]


def run_schedule(layers, steps, cu_a, cu_b, x, g, schedule, log=None):
    """One forward and backward of PingPong; returns y, x.grad and the parameters' gradients summed over ranks."""
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    model = ft.PingPong(layers, backend="fulcrum", trace=log.append if log is not None else None)
    x = x.clone().requires_grad_()
    contexts = (rope_context(cu_a, log=log, label="A"), rope_context(cu_b, log=log, label="B"))
    y = model(x, steps, contexts, schedule=schedule)
    if log is not None:
        log.append("backward")
    (y * g).sum().backward()
    params = [p.grad.clone() for layer in layers for p in layer.parameters()]
    for p in params:
        dist.all_reduce(p)
    return y.detach(), x.grad, params


def check_executor_resumes_bitwise(rank: int, steps) -> list[str]:
    """Both nano-batches' forward Programs interleaved as PingPong interleaves them (two lanes, InFlight) give
    bitwise run_program's O and LSE; so does the backward Program run the same way."""
    failures, g = [], torch.Generator().manual_seed(5 + rank)
    inputs = []
    for step in steps:
        rows = step.rows(rank)
        qkv = [torch.randn(rows, h, HEAD_DIM, generator=g) for h in (Q_HEADS, KV_HEADS, KV_HEADS)]
        inputs.append(dict(zip("qkv", qkv, strict=True)))
    kernels = ft.backends.select_backend("fulcrum", torch.device("cpu"), torch.float32)
    scale = 1.0 / math.sqrt(HEAD_DIM)
    plain = [run_program(s._forward, i, kernels, GroupComm(None), scale) for s, i in zip(steps, inputs, strict=True)]
    for pass_ in ("forward", "backward"):
        flight = InFlight()
        runs = []
        for n, (step, given) in enumerate(zip(steps, inputs, strict=True)):
            if pass_ == "backward":
                given = dict(given, o=plain[n]["o"], lse=plain[n]["lse"], d_o=torch.randn_like(given["q"]))
                inputs[n] = given
            plan = step._forward if pass_ == "forward" else step._backward
            runs.append(ProgramRun(plan, given, kernels, GroupComm(None, lane=n, lanes=2), scale))
            flight.start(n, runs[-1])
        got = [flight.finish(0), flight.finish(1)]
        for n, step in enumerate(steps):
            plan = step._forward if pass_ == "forward" else step._backward
            want = plain[n] if pass_ == "forward" else run_program(plan, inputs[n], kernels, GroupComm(None), scale)
            for name, tensor in want.items():
                if not torch.equal(tensor, got[n][name]):
                    failures.append(f"rank {rank}: interleaved {pass_} '{name}' of nano-batch {n} is not bitwise "
                                    "run_program's")
    return failures


def check_bad_input(rank: int, steps, layers, x) -> list[str]:
    failures = []
    model = ft.PingPong(layers, backend="fulcrum")
    cases = [
        ("steps", lambda: model(x, (steps[0],))),
        ("steps", lambda: model(x, (steps[0], "plan"))),
        ("x", lambda: model(x[1:], steps)),
        ("schedule", lambda: model(x, steps, schedule="interleaved")),
        ("contexts", lambda: model(x, steps, contexts=None)),
    ]
    for argument, call in cases:
        try:
            call()
            failures.append(f"rank {rank}: bad {argument} was accepted")
        except fulcrum.InputError as e:
            if not str(e).startswith(f"{argument}"):
                failures.append(f"rank {rank}: bad {argument} raised '{e}', which does not name it first")
    return failures


class LlamaBlock(nn.Module):
    """python/examples/llama_model.py's Block in the PingPongLayer protocol: the same modules and math, cut
    at attention (context = (cos, sin) of the nano-batch's rows, as LlamaModel computes them)."""

    def __init__(self, block) -> None:
        super().__init__()
        self.block = block

    def pre_attention(self, x, rope_angles):
        a, rows = self.block.attention, x.shape[0]
        h, c = self.block.attention_norm(x), a.c
        q = llama_model.rope(a.q_proj(h).view(rows, c.q_heads, c.head_dim), *rope_angles)
        k = llama_model.rope(a.k_proj(h).view(rows, c.kv_heads, c.head_dim), *rope_angles)
        return q.contiguous(), k.contiguous(), a.v_proj(h).view(rows, c.kv_heads, c.head_dim).contiguous(), x

    def post_attention(self, o, x, rope_angles):
        x = x + self.block.attention.o_proj(o.flatten(1))
        return x + self.block.mlp(self.block.mlp_norm(x))


def llama_angles(model, cu: list[int]):
    positions = torch.cat([torch.arange(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)] + [torch.zeros(0)])
    angles = positions.to(torch.float32)[:, None] * model.inverse_frequency[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def check_llama_model_blocks(rank: int, steps, per_rank_cu, first, second) -> list[str]:
    """The example model's blocks, adapted, give under PingPong what the model's own Block.forward gives
    with single-process attention over this rank's documents (outputs and input gradients, fp32)."""
    torch.manual_seed(11)
    c = llama_model.LlamaConfig(hidden=HIDDEN, layers=LAYERS, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM,
                                ffn_hidden=FFN)
    model = llama_model.LlamaModel(c)
    with torch.no_grad():  # weights larger than Llama's init (std 0.02), so that every branch moves the output
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.normal_(0, 0.15)
            else:  # RMSNorm
                weight.uniform_(0.5, 1.5)
    x, g = rank_data(rank, per_rank_cu[rank][-1])
    cu = per_rank_cu[rank]
    rows = PackedRows([Piece(d, 0, cu[d + 1] - cu[d], cu[d]) for d in range(len(cu) - 1)],
                      [cu[d + 1] - cu[d] for d in range(len(cu) - 1)])
    want_x = x.clone().requires_grad_()
    want, angles = want_x, llama_angles(model, cu)
    for block in model.blocks:
        want = block(want, *angles, reference_attention(rows))
    (want * g).sum().backward()
    got_x = x.clone().requires_grad_()
    contexts = (llama_angles(model, first[rank]), llama_angles(model, second[rank]))
    got = ft.PingPong([LlamaBlock(b) for b in model.blocks], backend="fulcrum")(got_x, steps, contexts)
    (got * g).sum().backward()
    return (compare(f"rank {rank} llama_model y", got, want.detach().double())
            + compare(f"rank {rank} llama_model dx", got_x.grad, want_x.grad.double()))


def check_rank(rank: int, world: int) -> dict:
    """Everything the multi-process tests check, on this rank of a gloo group (gloo_group.run_on_gloo)."""
    per_rank_cu = cu_seqlens(world, seed=world)
    steps = plan_steps(world)
    first, second = ft.split_documents(per_rank_cu)
    layers = make_layers()
    x, g = rank_data(rank, per_rank_cu[rank][-1])
    want_y, want_dx, want_params = reference(layers, per_rank_cu)

    failures, results, logs = [], {}, {}
    for schedule in ft.SCHEDULES:
        log: list[str] = []
        y, dx, params = run_schedule(layers, steps, first[rank], second[rank], x, g, schedule, log)
        results[schedule], logs[schedule] = y, log
        failures += compare(f"rank {rank} {schedule} y", y, want_y[rank])
        failures += compare(f"rank {rank} {schedule} dx", dx, want_dx[rank])
        for i, (got, want) in enumerate(zip(params, want_params, strict=True)):
            failures += compare(f"rank {rank} {schedule} parameter {i} gradient", got, want)
    if not torch.equal(results["pingpong"], results["sequential"]):
        failures.append(f"rank {rank}: ping-pong and sequential outputs are not bitwise equal")
    failures += check_executor_resumes_bitwise(rank, steps)
    failures += check_llama_model_blocks(rank, steps, per_rank_cu, first, second)
    failures += check_bad_input(rank, steps, layers, x)
    return {"failures": failures, "logs": logs}


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}-ranks")
def ranks(request):
    return request.param, run_on_gloo(check_rank, request.param)


def test_both_schedules_match_fp64_layers_and_the_executor_resumes_bitwise_and_llama_blocks_adapt(ranks):
    for result in ranks[1]:
        assert result["failures"] == []


# ---- The schedule's order ----
# The design, written out as calls: pre/post(X, l) run layer l's halves for nano-batch X (in backward, their
# gradients); begin/complete(X, l) the two halves of its attention (forward: start and finish; backward:
# finish's backward posts the backward Program, start's backward completes it). The backward order is what
# the CPU autograd engine does with the forward graph (of the ready nodes, the latest created first), so the
# other nano-batch's layer gradients run between a backward Program's begin and complete.


def forward_calls(layers: int) -> list[tuple[str, str, int]]:
    calls = [("pre", "A", 0), ("begin", "A", 0), ("pre", "B", 0), ("begin", "B", 0)]
    for index in range(layers):
        for x in "AB":
            calls += [("complete", x, index), ("post", x, index)]
            if index + 1 < layers:
                calls += [("pre", x, index + 1), ("begin", x, index + 1)]
    return calls


def backward_calls(layers: int) -> list[tuple[str, str, int]]:
    top = layers - 1
    calls = [("post", "B", top), ("begin", "B", top), ("post", "A", top), ("begin", "A", top)]
    for index in range(top, 0, -1):
        for x in "BA":
            calls += [("complete", x, index), ("pre", x, index), ("post", x, index - 1), ("begin", x, index - 1)]
    # Layer 0's input gradients are pieces of one split: both hooks fire once both nano-batches are done.
    return [*calls, ("complete", "B", 0), ("complete", "A", 0), ("pre", "A", 0), ("pre", "B", 0)]


def sequential_calls(layers: int, pass_: str) -> list[tuple[str, str, int]]:
    """A's whole stack then B's, each attention begun and completed before anything else runs; backward
    walks B's stack then A's (B's nodes were created last)."""
    if pass_ == "forward":
        return [(c, x, i) for x in "AB" for i in range(layers) for c in ("pre", "begin", "complete", "post")]
    calls = [(c, x, i) for x in "BA" for i in reversed(range(layers)) for c in ("post", "begin", "complete", "pre")]
    # Layer 0's input gradients are pieces of one split: both hooks fire once both nano-batches are done.
    calls = [c for c in calls if c[0] != "pre" or c[2] > 0]
    return [*calls, ("pre", "A", 0), ("pre", "B", 0)]


def segments(steps, rank: int, pass_: str, x: str) -> list[list[str]]:
    """The events of a nano-batch's Program cut as ProgramRun cuts it: a new segment at every wait."""
    step = steps["AB".index(x)]
    plan = step._forward if pass_ == "forward" else step._backward
    out: list[list[str]] = [[]]
    for i in plan.programs[rank].instructions:
        name = type(i).__name__
        if name == "Wait":
            out.append([f"wait {i.launch}", f"waited {i.launch}"])
        elif name == "Launch":
            out[-1].append(f"launch {i.id}")
        elif name in ("Attention", "AttentionBackward"):
            out[-1].append("attention" if name == "Attention" else "attention-backward")
    return out


def expected_log(steps, rank: int, pass_: str, layers: int, schedule: str = "pingpong") -> list[str]:
    """The events in the designed order: begin runs a Program's first segment; complete runs the rest,
    giving the other nano-batch's Program in flight one segment before each of its own waits but the first."""
    log: list[str] = []
    left: dict[tuple[str, int], list[list[str]]] = {}
    flight: dict[str, int] = {}

    def segment(x: str, index: int) -> None:
        log.extend(f"{x}{index} {pass_} {e}" for e in left[x, index].pop(0))

    if schedule == "sequential":
        calls = sequential_calls(layers, pass_)
    else:
        calls = forward_calls(layers) if pass_ == "forward" else backward_calls(layers)
    for call, x, index in calls:
        if call in ("pre", "post"):
            log.append(f"{x}{index} {call}" + ("" if pass_ == "forward" else " backward"))
        elif call == "begin":
            left[x, index], flight[x] = segments(steps, rank, pass_, x), index
            segment(x, index)
        else:
            del flight[x]
            other = "B" if x == "A" else "A"
            if left[x, index]:
                segment(x, index)
            while left[x, index]:
                if other in flight and left[other, flight[other]]:
                    segment(other, flight[other])
                segment(x, index)
    return log


@pytest.mark.parametrize("schedule", ft.SCHEDULES)
def test_schedules_run_the_designed_order_forward_and_backward(ranks, schedule):
    world, results = ranks
    steps = plan_steps(world)
    for rank, result in enumerate(results):
        log = result["logs"][schedule]
        cut = log.index("backward")
        assert log[:cut] == expected_log(steps, rank, "forward", LAYERS, schedule), f"rank {rank}"
        assert log[cut + 1 :] == expected_log(steps, rank, "backward", LAYERS, schedule), f"rank {rank}"


def test_pingpong_overlaps_every_launch_but_the_last_of_a_pass_with_the_other_nano_batch(ranks):
    """What the order is for: between posting a launch and waiting for it, the other nano-batch runs
    something (layers or its Program). Exempt: the last launch of each pass (nothing is left to hide it),
    and launches while the other nano-batch's Program in flight has no traffic on this rank (it ran whole
    inside its start, leaving nothing to interleave). The sequential schedule overlaps nothing."""
    for rank, result in enumerate(ranks[1]):
        for schedule in ft.SCHEDULES:
            log = result["logs"][schedule]
            cut = log.index("backward")
            for events in (log[:cut], log[cut + 1 :]):
                runs = [e.rsplit(" ", 2)[0] for e in events if e.split()[1] in ("forward", "backward")]
                with_traffic = {e.rsplit(" launch ", 1)[0] for e in events if " launch " in e}
                launches = [n for n, e in enumerate(events) if " launch " in e]
                for n in launches[:-1]:
                    run, launch = events[n].rsplit(" launch ", 1)
                    end = events.index(f"{run} wait {launch}", n)
                    other = [r for r in runs[: n + 1] if r[0] != run[0]]
                    if schedule == "pingpong" and other and other[-1] not in with_traffic:
                        continue
                    overlapped = any(not e.startswith(run[0]) for e in events[n + 1 : end])
                    assert overlapped == (schedule == "pingpong"), f"rank {rank} {schedule}: {events[n]}"


# ---- One process: splitting and refusals that need no group ----


def test_split_documents_cuts_whole_documents_nearest_half_of_each_rank():
    a, b = ft.split_documents([[0, 100, 300], [0, 50], [0], [0, 20, 40, 400], [0, 10, 20, 30, 40]])
    assert a == [[0, 100], [0, 50], [0], [0, 20, 40], [0, 10, 20]]
    assert b == [[0, 200], [0], [0], [0, 360], [0, 10, 20]]


def raises(message: str):
    return pytest.raises(fulcrum.InputError, match=re.escape(message))


def test_plan_nano_batches_refuses_planners_that_move_tokens_and_unsplittable_input():
    options = fulcrum.PlannerOptions(model_shape(), granularity=16)
    cu = [[0, 30, 90], [0, 50, 60, 100]]
    for name in fulcrum.planner_names():
        planner = fulcrum.make_planner(name, fulcrum.PlannerOptions(model_shape()))
        if not planner.capabilities.keeps_placement:
            with raises(f"planner: '{name}' places tokens on other ranks"):
                ft.plan_nano_batches(planner, cu, model_shape())
    distca = fulcrum.make_planner("distca", options)
    with raises("planner: a str"):
        ft.plan_nano_batches("distca", cu, model_shape())
    with raises("per_rank_cu_seqlens: no rank holds two documents"):
        ft.plan_nano_batches(distca, [[0, 30], [0, 50]], model_shape())
    with pytest.raises(fulcrum.InputError):  # from_cu_seqlens names the entry
        ft.plan_nano_batches(distca, [[0, 30, 20], [0, 50]], model_shape())
    step_a, step_b = ft.plan_nano_batches(distca, cu, model_shape())
    assert [step_a.rows(r) for r in range(2)] == [30, 50] and [step_b.rows(r) for r in range(2)] == [60, 50]
    assert step_a.mode == step_b.mode == "single-stream" and step_a.planner == "distca"


def test_pingpong_refuses_mismatched_steps_and_layers_before_any_traffic():
    options = fulcrum.PlannerOptions(model_shape(), granularity=16)
    cu = [[0, 30, 90], [0, 50, 60, 100]]
    steps = ft.plan_nano_batches(fulcrum.make_planner("distca", options), cu, model_shape())
    other_model = model_shape()
    other_model.kv_heads = 4
    other = ft.plan_nano_batches(fulcrum.make_planner("distca", options), cu, other_model)
    model = ft.PingPong(make_layers())
    x = torch.zeros(180, HIDDEN)
    with raises("steps: the two nano-batches' plans differ in kv_heads"):
        model(x, (steps[0], other[1]))
    with raises("steps: must be a pair"):
        model(x, steps[0])
    with raises("layers: must be a non-empty sequence"):
        ft.PingPong([nn.Linear(2, 2)])
    assert len(list(model.parameters())) == 9 * LAYERS  # the layers' parameters are the module's
