#!/usr/bin/env bash
# `pip install .[test,hf]` (torch and transformers) into a fresh virtual environment, as a user would, then
# the installed `fulcrum` command, the package tests and the training example from outside the source tree
# against the installed package. Fails if the extension links libmpi, if the tests import the source tree's
# package instead of the installed one, or if the project no longer configures the module alone when
# OpenMPI and CLI11 are unfindable (pip then installs the module without the command).
#   bash scripts/test_python_package.sh      (CI runs it; needs network access to PyPI for numpy, pytest,
#                                             torch, transformers and the build requirements)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The venv sees the system's site-packages: torch and transformers (setup.sh installs them there) are then
# not downloaded and unpacked a second time (torch's CUDA wheels are gigabytes). Fulcrum itself is installed
# into the venv and must be imported from it (checked below), which is what this script tests.
python3 -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
pip_flags=(--quiet --disable-pip-version-check)

# The same compiler (by name: ccache keys on it; scikit-build-core would pick Python's `g++`), build type and
# warnings as the dev build, so with ccache (.ci/run sets it up) the library's objects come from the dev
# build's; the build folder is inside the checkout for the same reason.
export CMAKE_ARGS="-DCMAKE_CXX_COMPILER=c++"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# --no-build-isolation: the build requirements (scikit-build-core, pybind11) come from the system too
# (setup.sh), so the bindings compile with the same pybind11 path as the dev build and ccache has them.
"$py" -m pip install "${pip_flags[@]}" --no-build-isolation "$repo[test,hf]" \
  --config-settings=build-dir="$repo/build/pip" \
  --config-settings=cmake.build-type=RelWithDebInfo \
  "--config-settings=cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  --config-settings=cmake.define.FULCRUM_WERROR=ON

cd "$work"  # outside the source tree: `import fulcrum` and `fulcrum` must be the installed ones
"$work/venv/bin/fulcrum" --version
"$work/venv/bin/fulcrum" models data/models/tiny/config.json >/dev/null  # the bundled data, from elsewhere
test -f "$work/venv/share/fulcrum/models/tiny/config.json"
# Without OpenMPI and CLI11 the wheel's configuration (FULCRUM_BUILD_APPS=AUTO) is the module alone.
module_only=$(cmake -S "$repo" -B "$work/module-only" -G Ninja -DFULCRUM_BUILD_APPS=AUTO -DFULCRUM_BUILD_TESTS=OFF \
  -DFULCRUM_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON)
grep -q "fulcrum: the CLI is not built" <<<"$module_only"
test ! -e "$work/module-only/apps"
installed=$("$py" -c 'import fulcrum, os; print(os.path.dirname(fulcrum.__file__))')
case "$installed" in
  "$work/venv/"*) ;;
  *) echo "test_python_package: imported fulcrum from $installed, not from the venv" >&2; exit 1 ;;
esac
extension=$(ls "$installed"/_core*.so)
if ldd "$extension" | grep -i 'libmpi'; then
  echo "test_python_package: $extension links MPI" >&2
  exit 1
fi
echo "test_python_package: $extension links no MPI"
# The tests marked `package` (the module's exports and stubs, plans, workloads, errors, fulcrum.torch's input
# checks) against the installed package: what differs here from the source tree is the install, not the code,
# and the whole suite ran minutes before against the same sources (scripts/test.sh, python.pytest).
"$py" -m pytest -q -p no:cacheprovider --rootdir="$work" "$repo/python/tests" -m package
# The example as the README runs it: one process (a 1-rank gloo group), two steps.
"$py" "$repo/python/examples/train_llama.py" --steps 2
