#!/usr/bin/env bash
# Builds the libFuzzer targets (in the `asan` preset's build: Clang, ASan + UBSan) and runs each for a bounded time
# from its committed seed corpus (fuzz/corpus/<target>/); exits 1 if any target finds anything (a crash, a
# sanitizer report, a leak, a failed property, an input slower than 10 s or above 2 GB).
#   bash scripts/fuzz.sh                     every target, 60 s each (each first replays its whole corpus)
#   FUZZ_SECONDS=300 bash scripts/fuzz.sh    longer
#   bash scripts/fuzz.sh plan_binary mask    some targets
# Findings are kept in build/asan/findings/<target>-crash-...; reproduce one with
#   build/asan/bin/<target>_fuzz build/asan/findings/<file>
# and once fixed, add it to fuzz/corpus/<target>/ so it stays fixed. New inputs the run finds go to a
# scratch folder, not the committed corpus (libFuzzer writes to the first folder it is given).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=(plan_binary plan_json lengths mask hardware model_config head_patterns)
[ $# -gt 0 ] && targets=("$@")

bash scripts/setup.sh
source scripts/build_env.sh
cmake --preset asan >/dev/null
cmake --build --preset asan --target fuzz_targets

findings=build/asan/findings
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$findings"
# One thread: the simulator's and kernels' OpenMP pools would only add noise to a single-input run.
export OMP_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1
failed=()
for target in "${targets[@]}"; do
  binary=build/asan/bin/${target}_fuzz
  seeds=fuzz/corpus/$target
  [ -x "$binary" ] && [ -d "$seeds" ] || { echo "fuzz: no target '$target'"; failed+=("$target"); continue; }
  mkdir -p "$scratch/$target"
  echo "=== fuzz: $target for $seconds s"
  if "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$findings/$target-" "$scratch/$target" "$seeds" >"$scratch/$target.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^Done" "$scratch/$target.log" || true
  else
    failed+=("$target")
    tail -n 60 "$scratch/$target.log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $findings/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $seconds s each, nothing found"
