"""A torch.distributed process group of this process alone (NCCL for CUDA, gloo for CPU) on a free loopback port:
what the one-device bench scripts plan and run fulcrum.torch over."""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist


def join_group_of_one(device: torch.device) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: container hostnames may not resolve
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1, timeout=timedelta(seconds=120))
