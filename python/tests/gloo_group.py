"""Runs a function on every rank of a real torch.distributed gloo group (one process per rank, loopback).

``run_on_gloo(fn, world, *args)`` spawns ``world`` processes, each calling ``fn(rank, world, *args)``
inside an initialised gloo process group, and returns what each rank's call returned (JSON-able values),
in rank order; an exception on any rank fails the caller with that rank's traceback.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world: int, port: int, out_dir: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: container hostnames may not resolve
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=timedelta(seconds=60))
    torch.set_num_threads(1)  # several ranks share this machine's cores
    try:
        result = {"value": fn(rank, world, *args)}
    except BaseException:  # reported by the parent, with this rank's traceback
        result = {"error": traceback.format_exc()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def run_on_gloo(fn: Callable[..., Any], world: int, *args: Any) -> list[Any]:
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the children
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_rank_main, args=(world, _free_port(), out_dir, fn, args), nprocs=world, join=True)
        results = []
        for rank in range(world):
            with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
                result = json.load(f)
            if "error" in result:
                raise AssertionError(f"rank {rank} failed:\n{result['error']}")
            results.append(result["value"])
    return results
