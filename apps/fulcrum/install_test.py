#!/usr/bin/env python3
"""`cmake --install` installs a working CLI and its bundled data, run by ctest:
`install_test.py CMAKE BUILD_DIR`.

Installs the build's `cli` component into a temporary prefix, then runs PREFIX/bin/fulcrum from another
working directory with paths to the bundled data (data/models/..., data/hardware/...), which it must find.
"""
import os
import subprocess
import sys
import tempfile

CMAKE, BUILD = sys.argv[1], os.path.abspath(sys.argv[2])
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


with tempfile.TemporaryDirectory() as prefix, tempfile.TemporaryDirectory() as elsewhere:
    result = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix, "--component", "cli"],
                            capture_output=True, text=True, timeout=300)
    check(result.returncode == 0, f"cmake --install: exit {result.returncode}: {result.stderr[-2000:]}")
    fulcrum = os.path.join(prefix, "bin", "fulcrum")
    for data in ("hardware/cpu-local.json", "models/tiny/config.json", "heads/llama3-8b-262k-minference.json"):
        check(os.path.isfile(os.path.join(prefix, "share", "fulcrum", data)), f"share/fulcrum/{data} not installed")

    def run(*args):
        return subprocess.run([fulcrum, *args], capture_output=True, text=True, timeout=300, cwd=elsewhere)

    version = run("--version")
    check(version.returncode == 0 and version.stdout.startswith("fulcrum "), f"--version: {version.stderr}")
    models = run("models", "data/models/tiny/config.json")
    check(models.returncode == 0 and "tiny" in models.stdout, f"models data/models/...: {models.stderr}")
    simulate = run("simulate", "--hardware", "data/hardware/cpu-local.json", "--gpus", "4", "--tp", "1",
                   "--max-doc-len", "4096", "--iterations", "1", "--planners", "packed", "-q")
    check(simulate.returncode == 0 and "cpu-local" not in simulate.stderr,
          f"simulate --hardware data/hardware/cpu-local.json from {elsewhere}: {simulate.stderr}")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
