#!/usr/bin/env bash
# fulcrum.torch on a CUDA machine that has PyTorch but no fmt / nlohmann-json packages and no network (the lent
# H100/H200 machines): builds fulcrum._core there, then runs bench/gpu_torch_check.py. Run from the repository
# root, with the Debian packages carried in $DEBS (default .gpudeps, git-ignored), fetched beforehand on a
# Debian machine that has network:
#     mkdir -p .gpudeps && (cd .gpudeps && apt-get download libfmt-dev libfmt9 nlohmann-json3-dev)
#     bash bench/gpu_torch_check.sh            # on the GPU machine; everything is tee'd to $OUT/gpu_check.log
# The .debs are unpacked into $DEPS (dpkg -x, nothing goes into /); the module alone is built with cmake + ninja
# in $BUILD. Overrides: PYTHON, DEBS, DEPS, BUILD, OUT, JOBS, CHECK_ARGS (e.g. "--device cpu" for a dry run),
# EXTRA_CMAKE (more configure flags), IMPORT_ONLY=1 (stop after importing fulcrum.torch), FRESH=1 (rebuild).
set -uo pipefail
repo=$(pwd)
here=${DEBS:-$repo/.gpudeps}
PYTHON=${PYTHON:-python3}
DEPS=${DEPS:-/tmp/deps}
BUILD=${BUILD:-/tmp/gpubuild}
OUT=${OUT:-/tmp/gpu_out}
JOBS=${JOBS:-16}
CHECK_ARGS=${CHECK_ARGS:-}
mkdir -p "$OUT"

main() {
t0=$(date +%s.%N)

if [ ! -f "$repo/CMakeLists.txt" ] || [ ! -f "$repo/bench/gpu_torch_check.py" ]; then
  fail "run it from the repository root (bash bench/gpu_torch_check.sh); here is $repo"
fi

echo "== machine"
echo "repo $repo, $(nproc) cores, JOBS=$JOBS, OUT=$OUT"
uname -a
grep -h PRETTY_NAME /etc/os-release 2>/dev/null
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode \
  --format=csv,noheader
ldd --version 2>&1 | head -1
echo "C++ compiler ${CXX:-c++} (CMake takes \$CXX): $("${CXX:-c++}" --version | head -1)"
cmake --version | head -1
echo "ninja $(ninja --version)"
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)') || fail "no $PYTHON"
"$PYTHON" - <<'EOF' || fail "python check"
import os, sys, sysconfig
import pybind11, torch
include = sysconfig.get_paths()["include"]
print(f"python {sys.version.split()[0]} at {sys.executable}; Python.h: "
      f"{'found' if os.path.exists(os.path.join(include, 'Python.h')) else 'MISSING'} in {include}")
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, available {torch.cuda.is_available()}); "
      f"pybind11 {pybind11.__version__}")
try:
    import transformers
    print(f"transformers {transformers.__version__}")
except ImportError as e:
    print(f"transformers: not importable ({e})")
EOF

echo "== unpacking the .debs into $DEPS"
rm -rf "$DEPS"
mkdir -p "$DEPS"
shopt -s nullglob
debs=("$here"/*.deb)
[ ${#debs[@]} -gt 0 ] || fail "no .deb files in $here"
for deb in "${debs[@]}"; do
  if command -v dpkg >/dev/null; then
    dpkg -x "$deb" "$DEPS" || fail "dpkg -x $deb"
  else  # no dpkg: a .deb is an ar archive holding data.tar.xz
    (cd "$DEPS" && ar p "$deb" data.tar.xz | tar -xJ) || fail "ar/tar $deb"
  fi
  echo "  $(basename "$deb")"
done
deps_lib="$DEPS/usr/lib/x86_64-linux-gnu"
ls "$deps_lib"/libfmt.so* >/dev/null || fail "no libfmt in $deps_lib"

echo "== configuring in $BUILD"
pybind11_dir=$("$PYTHON" -m pybind11 --cmakedir) || fail "python3 -m pybind11 --cmakedir"
t_configure=$(date +%s.%N)
[ "${FRESH:-0}" = 1 ] && rm -rf "$BUILD"  # else a rerun on the same machine rebuilds only what changed
# No MPI, BLAS, CLI, tests or benchmarks: the module alone (as `pip install .` does without OpenMPI and CLI11).
cmake -S "$repo" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DFULCRUM_BUILD_APPS=OFF -DFULCRUM_BUILD_TESTS=OFF -DFULCRUM_BUILD_BENCH=OFF -DFULCRUM_BUILD_PYTHON=ON \
  -DFULCRUM_WITH_MPI=OFF -DFULCRUM_WITH_BLAS=OFF -DFULCRUM_WERROR=OFF \
  -DCMAKE_PREFIX_PATH="$DEPS/usr" -Dpybind11_DIR="$pybind11_dir" -DPython3_EXECUTABLE="$PYTHON" ${EXTRA_CMAKE:-} \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; fail "cmake configure (full log: configure.log)"; }
grep -E "^(fmt_DIR|nlohmann_json_DIR|pybind11_DIR|Python3_EXECUTABLE)" "$BUILD/CMakeCache.txt"
echo "configured in $(elapsed "$t_configure") s"

echo "== building fulcrum._core (-j$JOBS)"
t_build=$(date +%s.%N)
cmake --build "$BUILD" --target fulcrum_python -j "$JOBS" >"$OUT/build.log" 2>&1 \
  || { grep -E "error|Error" "$OUT/build.log" | head -30; tail -30 "$OUT/build.log"; fail "build (full log: build.log)"; }
echo "built in $(elapsed "$t_build") s ($(grep -c '^\[' "$OUT/build.log") build steps)"
module=$(ls "$BUILD"/python/fulcrum/_core*.so 2>/dev/null | head -1)
[ -n "$module" ] || fail "no $BUILD/python/fulcrum/_core*.so"
echo "module $module"
ldd "$module" | grep -E "fmt|gomp|omp|stdc\+\+|not found"
# Some toolchains (the CUDA image's /opt/gcc) link libstdc++ statically; --exclude-libs keeps it private.
readelf -d "$module" | grep -q "libstdc++" || echo "libstdc++ is linked statically (hidden: $(nm -D --defined-only \
  "$module" | wc -l) symbols exported)"

export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
# The module links libfmt.so.9 from the unpacked .deb (the build tree's RUNPATH names it too).
export LD_LIBRARY_PATH="$deps_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset TRITON_INTERPRET  # the Triton kernels compiled for the GPU (interpreted they run on CPU tensors only)
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}  # NCCL's own reason when (c)'s two ranks on one GPU fail
"$PYTHON" -c "import fulcrum, fulcrum.torch; print('import fulcrum.torch: ok;', len(fulcrum.planner_names()), \
'planners:', ', '.join(fulcrum.planner_names()))" || fail "import fulcrum.torch"
echo "setup done in $(elapsed "$t0") s"
[ "${IMPORT_ONLY:-0}" = 1 ] && return 0

echo "== bench/gpu_torch_check.py $CHECK_ARGS"
t_check=$(date +%s.%N)
# shellcheck disable=SC2086  # CHECK_ARGS is a list of flags
"$PYTHON" "$repo/bench/gpu_torch_check.py" $CHECK_ARGS
status=$?
echo "check exited $status after $(elapsed "$t_check") s; total $(elapsed "$t0") s"
return $status
}

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
fail() { echo "run.sh: FAILED: $*"; exit 1; }
main 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
