#!/usr/bin/env python3
"""`fulcrum run` and `fulcrum demo` contracts that need real MPI processes: `run_test.py PATH_TO_FULCRUM`.

A rank that throws or hangs must end the whole job with that rank's message and a nonzero exit within
the watchdog's timeout; a run writes JSON, a Chrome trace and an SVG; bad input exits 2 before any
rank starts.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

FULCRUM = sys.argv[1]
SMALL = ["--dataset", "uniform:16:300", "--tokens-per-rank", "128", "--granularity", "16"]
failures = []


def run(*args, timeout=240):
    start = time.monotonic()
    result = subprocess.run([FULCRUM, *args], capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - start


def check(condition, message):
    if not condition:
        failures.append(message)


# One rank throws: the job ends at once with its message.
result, took = run("run", "--ranks", "4", *SMALL, "--inject-failure", "2:throw", "--timeout", "20")
check(result.returncode != 0, "a throwing rank left exit code 0")
check("rank 2: error: injected failure" in result.stderr, f"no message from rank 2: {result.stderr[-2000:]}")
check(took < 60, f"a throwing rank took {took:.0f} s to end the job")

# One rank hangs: the others' watchdog fires after --timeout and brings the job down.
result, took = run("run", "--ranks", "4", *SMALL, "--inject-failure", "1:hang", "--timeout", "3")
check(result.returncode != 0, "a hanging rank left exit code 0")
check("timed out" in result.stderr, f"no watchdog message: {result.stderr[-2000:]}")
check(took < 60, f"a hanging rank took {took:.0f} s to end the job")

# A good run writes every output, and its JSON carries the per-rank numbers.
with tempfile.TemporaryDirectory() as tmp:
    paths = {k: os.path.join(tmp, f"out.{k}") for k in ("json", "trace", "svg")}
    result, _ = run("run", "--ranks", "2", *SMALL, "--modes", "pingpong,signal", "--json", paths["json"],
                    "--trace", paths["trace"], "--svg", paths["svg"])
    check(result.returncode == 0, f"run exited {result.returncode}: {result.stderr[-2000:]}")
    if result.returncode == 0:
        report = json.load(open(paths["json"]))
        check(report["schema_version"] == 1, f"run --json: schema_version {report.get('schema_version')}")
        data = report["runs"]
        check([j["mode"] for j in data] == ["pingpong", "signal"], "modes missing from the JSON")
        check(data[0]["relative_error"]["o"] <= 1e-5, "pingpong O error above 1e-5")
        check(data[1]["relative_error"]["o"] == -1, "signal mode must not claim a checked error")
        for key in ("attention_s", "comm_s", "exposed_comm_s", "peer_wait_s", "end_idle_s"):
            check(key in data[0]["per_rank"][0]["forward"], f"per_rank forward lacks {key}")
        trace = json.load(open(paths["trace"]))
        check(any(e.get("name") == "attention" for e in trace["traceEvents"]), "trace has no attention events")
        check(open(paths["svg"]).read().startswith("<svg"), "the chart is not an SVG")

    # Documents crossing ranks laid out as DistCA's packing does (a head and a tail piece per rank): every
    # planner's plan on 4 MPI ranks still equals the reference, forward and backward; so does auto's choice.
    split_json = os.path.join(tmp, "head_tail.json")
    result, _ = run("run", "--ranks", "4", "--dataset", "uniform:64:700", "--tokens-per-rank", "256",
                    "--granularity", "16", "--boundary-split", "head-tail", "--planners", "distca,packed,wlb,auto",
                    "--candidates", "distca,packed,perdoc-cp", "--json", split_json)
    check(result.returncode == 0, f"head-tail run exited {result.returncode}: {result.stderr[-2000:]}")
    check("auto (one layer simulated on h200-dgx): chose " in result.stdout, f"run auto: {result.stdout[-2000:]}")
    if result.returncode == 0:
        for job in json.load(open(split_json))["runs"]:
            check(job["boundary_split"] == "head-tail", f"{job['planner']}: boundary_split {job['boundary_split']}")
            for tensor, error in job["relative_error"].items():
                check(0 <= error <= 1e-5, f"head-tail {job['planner']}: {tensor} error {error}")
            if job["planner"] == "auto":
                chosen = job["auto"]["chosen"]
                check(len(chosen) == 1 and chosen[0] in ("distca", "packed", "perdoc-cp"), f"auto chose {chosen}")

    # Issue 20's DistCA on 4 MPI ranks with every option on: head-tail boundary documents, resident K/V sent
    # to a rank once, and partial-K/V tasks (this batch's plan cuts rows along their keys: the thread-rank
    # test AttentionJob.DistcaPartialKvTasksWithHeadTailDocumentsEqualTheReference plans the same batch).
    partial_json = os.path.join(tmp, "partial_kv.json")
    result, _ = run("run", "--ranks", "4", "--model", "tiny", "--dataset", "uniform:300:1500", "--seed", "23",
                    "--tokens-per-rank", "128", "--granularity", "16", "--boundary-split", "head-tail",
                    "--partial-kv", "1", "--planners", "distca", "--modes", "pingpong,single-stream",
                    "--json", partial_json)
    check(result.returncode == 0, f"partial-kv run exited {result.returncode}: {result.stderr[-2000:]}")
    if result.returncode == 0:
        jobs = json.load(open(partial_json))["runs"]
        check(len(jobs) == 2, f"partial-kv runs: {len(jobs)}")
        for job in jobs:
            for tensor, error in job["relative_error"].items():
                check(0 <= error <= 1e-5, f"partial-kv {job['mode']}: {tensor} error {error}")

    # Plans are saved, one file per pass (their loading is tested by plan/serialize_test.cpp).
    plans = os.path.join(tmp, "plans")
    result, _ = run("run", "--ranks", "2", *SMALL, "--save-plans", plans)
    check(result.returncode == 0, f"run --save-plans exited {result.returncode}: {result.stderr[-2000:]}")
    check(sorted(os.listdir(plans)) == ["distca.pingpong.backward.fcpl", "distca.pingpong.forward.fcpl"],
          f"saved plans: {os.listdir(plans) if os.path.isdir(plans) else 'none'}")
    # JSON plans by --plan-format; a folder named *.json still means JSON for one release, with one warning.
    for folder, extra in (("json-plans", ["--plan-format", "json"]), ("plans.json", [])):
        path = os.path.join(tmp, folder)
        result, _ = run("run", "--ranks", "2", *SMALL, "--save-plans", path, *extra)
        saved = sorted(os.listdir(path)) if os.path.isdir(path) else []
        check(result.returncode == 0 and saved == ["distca.pingpong.backward.json", "distca.pingpong.forward.json"],
              f"run --save-plans {folder} {extra}: {saved} {result.stderr[-1000:]}")
        check(result.stderr.count("--plan-format json") == (0 if extra else 1),
              f"run --save-plans {folder}: warnings {result.stderr!r}")

    # The simulator replays the executed plans and prints predicted against measured times.
    result, _ = run("run", "--ranks", "2", *SMALL, "--simulate", "h200-dgx")
    check(result.returncode == 0 and "simulated on h200-dgx" in result.stdout and "iteration" in result.stdout,
          f"run --simulate: {result.returncode}, {result.stdout[-1000:]} {result.stderr[-1000:]}")

    # The link benchmark between two MPI ranks.
    comm_json = os.path.join(tmp, "comm.json")
    result, _ = run("bench", "comm", "--sizes", "8,65536", "--repeats", "3", "--json", comm_json)
    check(result.returncode == 0, f"bench comm exited {result.returncode}: {result.stderr[-2000:]}")
    if result.returncode == 0:
        data = json.load(open(comm_json))
        check(data["bandwidth_bytes_per_s"] > 0 and data["latency_s"] > 0, f"bench comm measured {data}")

    # The local backend (threads) runs the same jobs.
    result, _ = run("run", "--ranks", "3", "--backend", "local", *SMALL, "--planners", "distca,perdoc-cp",
                    "--cp-degree", "3")
    check(result.returncode == 0, f"local run exited {result.returncode}: {result.stderr[-2000:]}")

# Bad input: exit 2 with the field named, before any rank starts.
for args, field in ((["--ranks", "-1"], "ranks"), (["--modes", "overlap"], "modes"),
                    (["--dataset", "zipf:2"], "dataset"),
                    (["--planners", "nope"], "planner"), (["--inject-failure", "9:throw"], "inject-failure"),
                    (["--progress", "sometimes"], "progress"), (["--repeats", "0"], "repeats"),
                    (["--simulate", "b200"], "h200-dgx")):
    result, _ = run("run", *SMALL, *args)
    check(result.returncode == 2 and field in result.stderr, f"{args}: exit {result.returncode}, {result.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("run contract holds")
