"""The .pyi stubs must name everything the module exports, so type checkers and IDEs see the whole API."""
import re
from pathlib import Path

import pytest

from fulcrum import _core

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package

STUBS = Path(__file__).parents[1] / "fulcrum" / "_core.pyi"


def test_every_exported_name_has_a_stub():
    text = STUBS.read_text()
    stubbed = set(re.findall(r"^(?:class|def) (\w+)", text, re.M)) | set(re.findall(r"^(\w+)\s*[:=]", text, re.M))
    exported = {name for name in dir(_core) if not name.startswith("_")}
    assert exported - stubbed == set()

