#!/usr/bin/env bash
# ruff over the Python package, its tests and examples, the scripts, the benchmarks' and the CLI tests' Python; mypy --strict over the package
# (python/fulcrum, .pyi stubs included). Settings: pyproject.toml. CI runs this; any finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check python scripts bench apps
python3 -m mypy
