"""fulcrum.torch: run compiled Fulcrum plans as a differentiable PyTorch op on a torch.distributed group.

    step = fulcrum.torch.compile_step(assignment, model)       # forward + backward Plans, parsed once
    o = fulcrum.torch.attention(q, k, v, step, group)           # this rank's rows; o.backward() works

    steps = fulcrum.torch.plan_nano_batches(planner, per_rank_cu_seqlens, model)   # two nano-batches
    y = fulcrum.torch.PingPong(layers, group)(x, steps)         # DistCA's ping-pong layer schedule

One executor runs every planner's plan (it reads only the Plan): the Programs' messages go over the
group's P2P (gloo on CPU, NCCL on GPU), attention runs on a kernel backend (``fulcrum`` C++ kernels on
CPU, ``torch`` math on any device, ``flash`` flash-attn on CUDA). Importing this module imports torch;
``import fulcrum`` alone does not.

Models call attention through ``packed.PackedAttention`` (q, k, v of a rank's packed rows -> o):
``planned_attention(step, group)`` wraps this op, ``reference_attention(rows)`` is the single-process
baseline, ``PackedRows`` says which document tokens a rank's rows hold (RoPE positions restart per
document). ``fulcrum.torch.hf`` registers ``attn_implementation="fulcrum"`` with transformers.
"""
from .agreement import check_same_step, step_digest
from .backends import BACKENDS, KernelBackend
from .comm import WaitTime, measure_waits
from .function import attention
from .nano_batches import plan_nano_batches, split_documents
from .packed import PackedAttention, PackedRows, Piece, PlannedAttention, planned_attention, reference_attention
from .pingpong import SCHEDULES, PingPong, PingPongLayer
from .program import Document, OwnedRows
from .step import StepPlan, compile_step

__all__ = [
           "BACKENDS",
           "SCHEDULES",
           "Document",
           "KernelBackend",
           "OwnedRows",
           "PackedAttention",
           "PackedRows",
           "Piece",
           "PingPong",
           "PingPongLayer",
           "PlannedAttention",
           "StepPlan",
           "WaitTime",
           "attention",
           "check_same_step",
           "compile_step",
           "measure_waits",
           "plan_nano_batches",
           "planned_attention",
           "reference_attention",
           "split_documents",
           "step_digest",
]
