#!/usr/bin/env bash
# Installs the Debian packages Fulcrum builds with, if any is missing. Safe to run again.
set -euo pipefail
packages=(cmake ninja-build g++ python3 libgtest-dev libbenchmark-dev libfmt-dev nlohmann-json3-dev libcli11-dev
          libomp-dev openmpi-bin libopenmpi-dev)
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
