"""fulcrum._core exports PyInit__core and nothing of the static libraries linked into it.

Were Fulcrum's libraries, or a statically linked libstdc++ (some toolchains link it so), exported, a library
loaded later would bind to our copies: on a lent H200, torch 2.11 imported after fulcrum aborted in free()
inside its libstdc++'s std::locale::~locale, which had bound to the copy in our module.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import fulcrum

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF symbol tables: Linux only")
def test_the_module_exports_only_its_init_function() -> None:
    nm = shutil.which("nm")
    assert nm is not None, "nm (binutils) is needed to read the module's symbol table"
    listing = subprocess.run([nm, "-D", "--defined-only", fulcrum._core.__file__], capture_output=True, text=True,
                             check=True).stdout
    # Strong definitions of code and data (T, D, B, R): the module's own are hidden, so only the Python entry point
    # stays. Weak template instantiations (W, V) and header-defined unique objects (u) may remain.
    strong = sorted(fields[2] for fields in map(str.split, listing.splitlines())
                    if len(fields) == 3 and fields[1] in "TDBR")
    assert strong == ["PyInit__core"], f"{len(strong)} strong symbols exported, e.g. {strong[:5]}"
