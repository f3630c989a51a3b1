#!/usr/bin/env python3
"""Every command block of README.md, docs/cli.md, docs/performance.md and docs/experiments.md, run with small
sizes (ctest `docs_commands`): `doc_commands_test.py FULCRUM_BIN_DIR PYTHON_STAGE`.

Each ```bash block is split into commands (backslash continuations joined, comments dropped, a heredoc kept
with its command). A `fulcrum` command runs with its sizes capped (SMALL below: the documented command's
shape at a size that takes seconds), from a scratch directory, and must exit 0; so do the benchmark scripts
(BENCH_SMALL), the benchmark binaries (BINARY_SMALL; `build/<preset>/bin/NAME` runs the test's build's NAME)
and the Python heredoc, against the staged module. What only measures or pins a command is dropped before it
runs: `taskset -c CPUS`, `/usr/bin/time [-v | -f FORMAT]`; `NAME=value` words before a command are its
environment (`PYTHONPATH=build/<preset>/python` is the staged module). Commands another test already runs are
named with that test (COVERED); any other command fails this test, so a new command in the docs is either
run here or says where it is.
"""
import itertools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

BIN, STAGE = (os.path.abspath(a) for a in sys.argv[1:3])
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOCS = ["README.md", "docs/cli.md", "docs/performance.md", "docs/experiments.md"]

# Option -> its value in the test (a callable of the documented value, or a fixed value).
SMALL = {
    "--gpus": "16", "--max-doc-len": "16384", "--iterations": "1", "--batches": "1", "--repeats": "1",
    "--tokens-per-rank": lambda v: v if v == "0" else str(min(int(v), 8192)),
    "--tokens": lambda v: str(min(int(v), 4096)), "--prompt-tokens": "512,1024",
    "--ranks": lambda v: str(min(int(v), 4)), "--lengths": "1024", "--split-length": "1024",
    "--query-lengths": "256,512", "--key-lengths": "256,512", "--sizes": "8,65536",
    "--sweep": lambda v: v.split("=")[0] + "=" + ",".join(v.split("=")[1].split(",")[:2]),
    "--dataset": lambda v: ":".join([v.split(":")[0], *(str(min(int(n), 16384)) for n in v.split(":")[1:])])
    if v.startswith("uniform:") else v,
}
# Tighter caps where a subcommand runs real kernels on this machine's 2 cores: run's ranks and tokens, and a
# real prefill's prompt (one with a measured --profile keeps the profile's grid, at least 4096 tokens).
SMALL_IN = {
    "run": {"--tokens-per-rank": "2048", "--ranks": "2"},
    "prefill": {"--tokens": lambda v: str(min(int(v), 512))},
}
# Options a command gets when it does not give them, by subcommand: its defaults, smaller.
ADDED = {
    "run": {"--tokens-per-rank": "2048"},
    "demo": {"--tokens-per-rank": "2048"},
    "bench kernels": {"--lengths": "1024", "--shards": "1024", "--repeats": "1"},
    "profile": {"--query-lengths": "256,512", "--key-lengths": "256,512", "--repeats": "1"},
    "heads": {"--repeats": "1"},
    "prefill": {"--repeats": "1", "--tokens": "512"},
    "simulate": {"--iterations": "1"},
}
DROPPED = {"--full"}  # the full benchmark grid: the quick default instead
# The benchmark scripts the docs show, at a size that takes seconds (argparse keeps an option's last value).
BENCH_SMALL = {
    "bench/compare_sdpa.py": ["--lengths", "512", "--heads", "2", "--head-dim", "32", "--repeats", "1"],
    "bench/torch_training.py": ["--ranks", "2", "--tokens-per-rank", "512", "--steps", "1", "--warmup", "0",
                                "--planners", "distca"],
    "bench/torch_pingpong.py": ["--ranks", "2", "--tokens-per-rank", "1024", "--layers", "1", "--steps", "1"],
    "bench/plan_sharing.py": ["--ranks", "2", "--tokens-per-rank", "2048", "--batches", "1"],
    "bench/torch_attention_speed.py": ["--tokens", "1024", "--q-heads", "2", "--kv-heads", "1", "--head-dim", "32",
                                       "--repeats", "1", "--warmup", "0"],
    "bench/distca_traffic.py": ["--fulcrum", os.path.join(BIN, "fulcrum"), "--python-dir", STAGE, "--ranks", "64",
                                "--seeds", "0", "--tolerances", "0.1"],
}
# The benchmark binaries the docs show, by name: their caps (Google Benchmark's flags as --flag=value), and SMALL's.
GBENCH_SMALL = {"--benchmark_repetitions": "1", "--benchmark_min_time": "0.01"}
BINARY_SMALL = {
    "plan_bench": GBENCH_SMALL,
    "backward_bench": {**GBENCH_SMALL, "--benchmark_filter": "shard:512/deterministic:1"},  # one case of 8 shards
    "sparse_kernel_bench": {"--length": "2048"},
    "mtraining_estimator_bench": {"--lengths": "4096"},
}
# Commands run elsewhere, by the first words: which test runs them.
COVERED = {
    "bash scripts/demo.sh": "its build is scripts/test.sh's (CI); `fulcrum demo` runs in ctest cli_charts_render",
    "fulcrum demo --out": "ctest cli_charts_render (`fulcrum demo --out DIR`, at 128 tokens per rank)",
    "bash scripts/test.sh": "CI (.ci/run) runs it first",
    "torchrun": "ctest python.torch_training (train_llama.py's planners on 2 and 4 gloo ranks)",
    "python3 python/examples/train_llama.py": "CI's package step (scripts/test_python_package.sh)",
    "python3 -m pytest": "ctest python.pytest and python.torch_training",
    "PYTHONPATH=build/dev/python torchrun": "ctest python.torch_training",
    "pip install": "CI's package step (scripts/test_python_package.sh)",
    "cmake --install": "ctest cli_install",
    "fulcrum run --ranks 4 --planners mtraining,zigzag,ring,striped --mask vslash-dynamic":
        "ctest run_mpi_mtraining_4_dynamic (this command, its documents 8K tokens)",
    "python3 bench/gpu_head_profile.py": "ctest python.pytest (test_gpu_head_profile.py runs it on the CPU)",
}
# Variables the test's environment already sets (an `export` of them in the docs is skipped).
EXPORTED = {"PATH", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}


def commands(text):
    """(command, source line) of every ```bash block."""
    out = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        line_no = text[:block.start()].count("\n") + 2
        lines = block.group(1).splitlines()
        i = 0
        while i < len(lines):
            start = i
            command = lines[i]
            while command.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command.rstrip()[:-1] + " " + lines[i].strip()
            heredoc = re.search(r"<<'(\w+)'", command)
            if heredoc:
                body = []
                while i + 1 < len(lines) and lines[i + 1].strip() != heredoc.group(1):
                    i += 1
                    body.append(lines[i])
                i += 1
                command = command + "\n" + "\n".join(body) + "\n" + heredoc.group(1)
            i += 1
            command = command if heredoc else re.sub(r"\s+#.*$", "", command).strip()
            if command and not command.startswith("#"):
                out.append((command, line_no + start))
    return out


def unwrapped(words, env):
    """The command inside its wrappers (`NAME=value ...`, `taskset -c CPUS`, `/usr/bin/time [-v|-f F]`), and its
    environment."""
    env = dict(env)
    while words:
        assignment = re.fullmatch(r"(\w+)=(\S*)", words[0])
        if assignment:
            name, value = assignment.groups()
            env[name] = STAGE if name == "PYTHONPATH" and re.fullmatch(r"build/\w+/python", value) else value
            words = words[1:]
        elif words[0] == "taskset" and len(words) > 2 and words[1] == "-c":
            words = words[3:]
        elif words[0] == "/usr/bin/time":
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] in ("-f", "-o") else words[1:]
        else:
            return words, env
    return words, env


def binary_small(name, args):
    """A benchmark binary's arguments at a small size."""
    small, out, i = dict(BINARY_SMALL[name]), [], 0
    while i < len(args):
        word = args[i]
        key = word.split("=")[0]
        if key.startswith("--benchmark") and key in small:  # Google Benchmark's --flag=value
            out.append(f"{key}={small.pop(key)}")
        elif word in small and i + 1 < len(args):
            out += [word, small.pop(word)]
            i += 1
        elif word in SMALL and i + 1 < len(args):  # --repeats and the like
            rule = SMALL[word]
            out += [word, rule(args[i + 1]) if callable(rule) else rule]
            i += 1
        else:
            out.append(word)
        i += 1
    for key, value in small.items():  # caps the documented command does not give
        out += [f"{key}={value}"] if key.startswith("--benchmark") else [key, value]
    return [os.path.join(BIN, name), *out]


def as_parsed(argv):
    """A benchmark script's command line as argparse reads it (an option's last value wins, positionals in
    order), so two documented invocations that shrink to the same run are run once."""
    positionals, options, i = [], {}, 0
    while i < len(argv):
        word = argv[i]
        takes_value = word.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        if word.startswith("--"):
            options[word] = argv[i + 1] if takes_value else None
        else:
            positionals.append(word)
        i += 2 if takes_value else 1
    return tuple(positionals), tuple(sorted(options.items()))


def shrunk(words, variables):
    words = [variables.get(w.split("/")[0], w.split("/")[0]) + w[len(w.split("/")[0]):] for w in words]
    subcommand = " ".join(words[1:3]) if words[1] == "bench" else words[1]
    real_prefill = subcommand == "prefill" and "--simulate" not in words and "--profile" not in words
    for option, value in ADDED.get(subcommand, {}).items():
        heads_profile = subcommand == "profile" and "--heads" in words
        if option == "--tokens" and not real_prefill:
            continue
        if option not in words and not (heads_profile and option != "--repeats"):
            words = [*words, option, value]
    small = dict(SMALL)
    if subcommand != "prefill" or real_prefill:
        small.update(SMALL_IN.get(subcommand, {}))
    # Pipeline stages need tp x pp GPUs to divide the capped GPU count: twice the most stages x tp 8.
    stages = []
    for option, value in itertools.pairwise(words):
        if option == "--pp":
            stages.append(int(value))
        elif option == "--sweep" and value.startswith("pp="):
            stages += [int(n) for n in value.removeprefix("pp=").split(",")]
    if stages and max(stages) > 1:
        small["--gpus"] = str(16 * max(stages))
    out, i = [], 0
    while i < len(words):
        word = words[i]
        if word in DROPPED:
            i += 1
            continue
        if word in small and i + 1 < len(words):
            rule = small[word]
            out += [word, rule(words[i + 1]) if callable(rule) else rule]
            i += 2
            continue
        out.append(word)
        i += 1
    return out


failures, ran, covered = [], 0, 0
already = {}  # a command that shrinks to one already run (another doc shows it too) runs once
variables = {}  # VAR=value lines of a block, substituted as $VAR at the start of a path
env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], PYTHONPATH=STAGE, OMP_NUM_THREADS="2",
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
for doc in DOCS:
    for command, line in commands(open(os.path.join(ROOT, doc)).read()):
        where = f"{doc}:{line}"
        reason = next((why for prefix, why in COVERED.items() if command.startswith(prefix)), None)
        if reason:
            covered += 1
            print(f"covered  {where}: {command.splitlines()[0][:70]} -- {reason}")
            continue
        exported = re.fullmatch(r"export((?: \w+=\S*)+)", command)
        if exported and {w.split("=")[0] for w in exported.group(1).split()} <= EXPORTED:
            continue  # the test's own environment has them (PATH with the build's bin first)
        assignment = re.fullmatch(r"(\w+)=(\S+)", command)
        if assignment:
            variables["$" + assignment.group(1)] = assignment.group(2)
            continue
        run_env = env
        if command.startswith("PYTHONPATH=build/dev/python python3 - <<"):
            argv, stdin = ["python3", "-"], command.split("\n", 1)[1].rsplit("\n", 1)[0]
        else:
            words = [os.path.join(BIN, "fulcrum") if w == "$(command -v fulcrum)" else w for w in shlex.split(command)]
            words, run_env = unwrapped(words, env)
            name = os.path.basename(words[0]) if words else ""
            stdin = None
            if words and words[0] == "fulcrum":
                argv = shrunk(words, variables)
            elif words[:1] == ["python3"] and len(words) > 1 and words[1] in BENCH_SMALL:
                argv = [*words[:1], os.path.join(ROOT, words[1]), *words[2:], *BENCH_SMALL[words[1]]]
            elif name in BINARY_SMALL and (words[0] == name or re.fullmatch(r"build/\w+/bin/\w+", words[0])):
                argv = binary_small(name, words[1:])
            else:
                failures.append(f"{where}: `{command[:80]}` is neither run here nor COVERED by another test")
                continue
        script = len(argv) > 1 and os.path.relpath(argv[1], ROOT) in BENCH_SMALL
        key = (as_parsed(argv) if script else tuple(argv), stdin, tuple(sorted(run_env.items())))
        if key in already:
            print(f"same     {where}: as {already[key]}")
            continue
        already[key] = where
        # From a scratch folder that sees the checkout's data/ and docs/, as a user in the repository would.
        with tempfile.TemporaryDirectory() as scratch:
            for folder in ("data", "docs"):
                os.symlink(os.path.join(ROOT, folder), os.path.join(scratch, folder))
            start = time.monotonic()
            result = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=scratch, env=run_env,
                                    timeout=600)
        ran += 1
        print(f"ran      {where}: {' '.join(argv)[:100]} -> exit {result.returncode} in "
              f"{time.monotonic() - start:.1f} s")
        if result.returncode != 0:
            failures.append(f"{where}: `{' '.join(argv)}` exited {result.returncode}: {result.stderr[-1500:]}")

print(f"{ran} commands ran, {covered} covered by other tests")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures or ran == 0 else 0)
