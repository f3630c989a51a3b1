# Sourced by the build scripts (demo.sh, test.sh): compile through ccache when it is there (setup.sh installs
# it), keyed on paths relative to the checkout, so demo.sh, test.sh, pip (test_python_package.sh) and a
# second clone reuse each other's objects wherever their compile commands agree.
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
