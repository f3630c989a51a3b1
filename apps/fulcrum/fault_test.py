#!/usr/bin/env python3
"""Faults on real processes, run by ctest: `fault_test.py FULCRUM COMMAND FAULT`.

COMMAND is `run` or `prefill` (both start themselves under mpiexec through the same launcher). FAULT:
  kill-rank  SIGKILL one rank: the job ends within 5 s, stderr is one line naming the rank and the signal
  stop-rank  SIGSTOP one rank: the watchdog (--timeout 3) ends the job, stderr is one line naming the rank
  sigterm, sigint
             the signal to the launcher: it ends by that signal within 5 s, stderr is one line, and no
             process of the job is left 5 s after the signal
  sigkill    SIGKILL to the launcher: no process of the job is left 5 s after it
  one-line   a rank that fails by itself (--inject-failure): one stderr line, with the rank's message

The job's processes (launcher, mpiexec, ranks) are found by a marker in their environment, unique to the
test; whatever is left of them at the end is killed, so a failing test leaves no runaway job behind.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid

FULCRUM, COMMAND, FAULT = sys.argv[1], sys.argv[2], sys.argv[3]
MARKER = f"FULCRUM_FAULT_TEST={uuid.uuid4().hex}"
LIMIT_S = 5.0
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:  # gone, or a zombie
        return []


def job_processes():
    """pid -> its MPI rank (None for the launcher and mpiexec), for every live process with the marker."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = environ(int(entry))
        if MARKER in env:
            rank = next((int(v.split("=", 1)[1]) for v in env if v.startswith("OMPI_COMM_WORLD_RANK=")), None)
            found[int(entry)] = rank
    return found


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def wait_for_ranks(launcher, ranks, limit_s=120):
    """Rank -> pid once every rank has computed for a while (past MPI_Init, which has no watchdog)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and launcher.poll() is None:
        pids = {r: p for p, r in job_processes().items() if r is not None}
        if len(pids) == ranks and all(cpu_s(p) >= 0.5 for p in pids.values()):
            return pids
        time.sleep(0.1)
    failures.append(f"the {ranks} ranks never got going (launcher exit {launcher.poll()})")
    return None


def none_left_within(limit_s, since):
    left = job_processes()
    while left and time.monotonic() - since < limit_s:
        time.sleep(0.1)
        left = job_processes()
    return left


def start(tmp, ranks, *extra, tokens=4096):
    if COMMAND == "run":
        args = ["run", "--ranks", str(ranks), "--dataset", f"uniform:1024:{tokens}", "--tokens-per-rank", str(tokens),
                "--repeats", "1000", "--reference", "none"]
    else:
        args = ["prefill", "--ranks", str(ranks), "--model", "tiny", "--tokens", "1024", "--repeats", "1000",
                "--weights", os.path.join(tmp, "tiny.weights")]
    env = dict(os.environ)
    name, value = MARKER.split("=", 1)
    env[name] = value
    return subprocess.Popen([FULCRUM, *args, *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def ended(launcher, limit_s):
    """(exit code, stderr lines, seconds) once the launcher has ended, or None after limit_s."""
    start_s = time.monotonic()
    try:
        _, err = launcher.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        failures.append(f"the launcher was still running {limit_s:.0f} s after the fault")
        return None
    # prefill's note that it wrote the weights file is not an error line
    lines = [x for x in err.strip().splitlines() if not x.startswith("fulcrum: wrote random weights")]
    return launcher.returncode, lines, time.monotonic() - start_s


def one_line(lines, pattern, what):
    check(len(lines) == 1 and re.search(pattern, lines[0]) is not None,
          f"{what}: expected one stderr line matching {pattern!r}, got {lines}")


with tempfile.TemporaryDirectory() as tmp:
    launcher = None
    try:
        if FAULT in ("kill-rank", "stop-rank"):
            stop = FAULT == "stop-rank"
            ranks = 2 if stop else 3  # two ranks: the watchdog's rank waits for the stopped one, no other
            # Small steps when stopping: the watchdog starts once the other rank's compute step is done.
            launcher = start(tmp, ranks, "--timeout", "3" if stop else "60", tokens=1024 if stop else 4096)
            pids = wait_for_ranks(launcher, ranks)
            if pids:
                os.kill(pids[1], signal.SIGSTOP if stop else signal.SIGKILL)
                since = time.monotonic()
                result = ended(launcher, 3 + LIMIT_S if stop else LIMIT_S)
                if result:
                    code, lines, took = result
                    check(code != 0, "the job exited 0")
                    if stop:
                        one_line(lines, r"timed out after 3 s .*(rank 1 never arrived|(receive from|send to) rank 1 )",
                                 "stopped rank")
                    else:
                        one_line(lines, r"^fulcrum: rank 1: error: killed by signal 9 \(SIGKILL\)", "killed rank")
                    left = none_left_within(LIMIT_S, since)
                    check(not left, f"processes left {LIMIT_S:.0f} s after the fault: {left}")
                    print(f"{FAULT}: job ended in {took:.2f} s: {lines}")
        elif FAULT in ("sigterm", "sigint", "sigkill"):
            sig = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT, "sigkill": signal.SIGKILL}[FAULT]
            launcher = start(tmp, 3, "--timeout", "60")
            if wait_for_ranks(launcher, 3):
                check(len(job_processes()) == 5, f"expected launcher, mpiexec and 3 ranks: {job_processes()}")
                launcher.send_signal(sig)
                since = time.monotonic()
                result = ended(launcher, LIMIT_S)
                if result:
                    code, lines, took = result
                    check(code == -sig, f"the launcher exited {code}, expected death by {sig.name}")
                    if sig != signal.SIGKILL:
                        one_line(lines, f"stopped by {sig.name}", "signalled launcher")
                left = none_left_within(LIMIT_S, since)
                check(not left, f"processes left {LIMIT_S:.0f} s after {sig.name} to the launcher: {left}")
                print(f"{sig.name} to the launcher: {len(job_processes())} processes left after "
                      f"{time.monotonic() - since:.2f} s")
        elif FAULT == "one-line":
            injection = ["--inject-failure", "1:throw"] if COMMAND == "run" else ["--inject-failure", "1"]
            launcher = start(tmp, 3, "--timeout", "60", *injection)
            result = ended(launcher, 120)
            if result:
                code, lines, _ = result
                check(code != 0, "the job exited 0")
                one_line(lines, r"^fulcrum: rank 1: error: .*injected", "failing rank")
        else:
            sys.exit(f"unknown fault {FAULT}")
    finally:
        for pid in job_processes():  # only this test's processes carry the marker
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if launcher is not None and launcher.poll() is None:
            launcher.kill()
            launcher.wait()

for f in failures:
    print(f"FAIL: {f}")
sys.exit(1 if failures else 0)
