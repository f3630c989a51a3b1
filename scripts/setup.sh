#!/usr/bin/env bash
# Installs the Debian packages Fulcrum builds with, if any is missing. Safe to run again.
set -euo pipefail
packages=(cmake ninja-build g++ python3 libgtest-dev libbenchmark-dev libfmt-dev nlohmann-json3-dev libcli11-dev
          libomp-dev openmpi-bin libopenmpi-dev libopenblas-dev python3-dev python3-pip python3-venv ccache
          clang-14 clang-tidy-14 clang-format-14  # CI's Clang, TSan (with libomp-dev), tidy and format steps
          libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
          librsvg2-bin)       # rsvg-convert: the chart render tests (scripts/svg_label_check.py)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The Python module and its tests need these from PyPI (torch and transformers too, for fulcrum.torch and its
# Hugging Face integration: CI reaches PyPI but not download.pytorch.org). Each is installed only when python3
# cannot import it, so a warm machine pays one import check each and torch's large download happens once.
python_requirements=(pybind11:pybind11 numpy:numpy pytest:pytest scikit_build_core:scikit-build-core torch:torch
                     transformers:transformers ruff:ruff mypy:mypy
                     jsonschema:jsonschema)  # the published JSON Schemas (docs/schemas) checked against real outputs
python_missing=()
for entry in "${python_requirements[@]}"; do
  python3 -c "import ${entry%%:*}" >/dev/null 2>&1 || python_missing+=("${entry#*:}")
done
if [ ${#python_missing[@]} -gt 0 ]; then
  echo "setup: pip-installing ${python_missing[*]}"
  pip_flags=(--quiet --disable-pip-version-check)
  pip_help=$(python3 -m pip help install)
  # Debian marks its interpreter externally managed (PEP 668); CI's machine is throwaway, so install into it.
  grep -q -- --break-system-packages <<<"$pip_help" && pip_flags+=(--break-system-packages)
  grep -q -- --root-user-action <<<"$pip_help" && pip_flags+=(--root-user-action=ignore)
  python3 -m pip install "${pip_flags[@]}" "${python_missing[@]}"
fi
