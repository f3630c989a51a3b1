#!/usr/bin/env python3
"""Runs an MPI job in which one rank fails (mpi_communicator_test --fail-on-rank=R) and checks that the
whole job ends quickly with a nonzero exit status and the failing rank's message on stderr, i.e. that
Communicator::abort brings every rank down instead of leaving the others waiting for the dead one.

Usage: mpi_abort_check.py MPIEXEC_ARGS... BINARY --fail-on-rank=R
"""
import subprocess
import sys
import time

LIMIT_S = 30.0


def main() -> int:
    command = sys.argv[1:]
    fail_rank = next(a.split("=", 1)[1] for a in command if a.startswith("--fail-on-rank="))
    expected = f"rank {fail_rank}: deliberate failure on rank {fail_rank}"
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_S * 2)
    except subprocess.TimeoutExpired:
        print(f"FAIL: job still running after {LIMIT_S * 2:.0f} s: abort did not end it", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - start
    sys.stderr.write(done.stderr)
    problems = []
    if done.returncode == 0:
        problems.append("exit status 0, expected nonzero")
    if expected not in done.stderr:
        problems.append(f"stderr lacks {expected!r}")
    if elapsed >= LIMIT_S:
        problems.append(f"took {elapsed:.1f} s, limit {LIMIT_S:.0f} s")
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    if not problems:
        print(f"ok: exit status {done.returncode} after {elapsed:.2f} s, failing rank's message on stderr")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
