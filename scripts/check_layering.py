#!/usr/bin/env python3
"""Checks the module layering: every `#include "fulcrum/..."` of a module's file (sources, headers, tests)
names a header of the module itself or of a module it may use: its declared deps and, through them, their
PUBLIC deps. The declarations come from src/fulcrum/CMakeLists.txt, which writes them to
build/<preset>/fulcrum_modules.tsv (one line per module: name, deps, public deps, files; lists comma-separated)
and refuses a dep that is not declared before the module, so the list is the layering order.

  check_layering.py MANIFEST SRC_DIR   exit 1 and one line per offending include
  check_layering.py --self-test        shows that a lower module including a higher one is caught
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](fulcrum/[^">]+)[">]', re.MULTILINE)


def load(manifest: Path) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]], dict[str, str]]:
    order: list[str] = []
    deps: dict[str, list[str]] = {}
    public: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for line in manifest.read_text().splitlines():
        if not line.strip():
            continue
        name, dep_text, public_text, files_text = line.split("\t")
        order.append(name)
        deps[name] = [d for d in dep_text.split(",") if d]
        public[name] = [d for d in public_text.split(",") if d]
        for f in files_text.split(","):
            if f in owner:
                raise SystemExit(f"check_layering: {f} belongs to both {owner[f]} and {name}")
            owner[f] = name
    return order, deps, public, owner


def visible(module: str, deps: dict[str, list[str]], public: dict[str, list[str]]) -> set[str]:
    """The modules whose headers `module` may include: itself, its deps, and their PUBLIC deps, transitively."""
    seen = {module}
    stack = list(deps[module])
    while stack:
        m = stack.pop()
        if m not in seen:
            seen.add(m)
            stack.extend(public[m])
    return seen


def check(manifest: Path, src: Path) -> list[str]:
    order, deps, public, owner = load(manifest)
    problems = []
    for name in order:
        for dep in deps[name]:
            if dep not in order or order.index(dep) >= order.index(name):
                problems.append(f"{name}: depends on {dep}, which is not below it in the module list")
    allowed = {m: visible(m, deps, public) for m in order}
    for path, module in sorted(owner.items()):
        text = (src / path).read_text()
        for match in INCLUDE.finditer(text):
            header = match.group(1)
            target = owner.get(header)
            line = text.count("\n", 0, match.start()) + 1
            if target is None:
                problems.append(f"src/{path}:{line}: includes {header}, which no module owns")
            elif target not in allowed[module]:
                problems.append(f"src/{path}:{line}: module {module} includes {header} of module {target}, "
                                f"which it does not depend on (it may use: {', '.join(sorted(allowed[module]))})")
    return problems


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        (src / "fulcrum/plan").mkdir(parents=True)
        (src / "fulcrum/runtime").mkdir(parents=True)
        (src / "fulcrum/plan/a.hpp").write_text('#include "fulcrum/plan/a.hpp"\n')
        (src / "fulcrum/runtime/b.hpp").write_text('#include "fulcrum/plan/a.hpp"\n')
        manifest = src / "m.tsv"
        manifest.write_text("plan\t\t\tfulcrum/plan/a.hpp\nruntime\tplan\tplan\tfulcrum/runtime/b.hpp\n")
        if check(manifest, src):
            print("self-test: a clean tree was reported", file=sys.stderr)
            return 1
        (src / "fulcrum/plan/a.cpp").write_text('#include "fulcrum/runtime/b.hpp"\n')
        manifest.write_text("plan\t\t\tfulcrum/plan/a.hpp,fulcrum/plan/a.cpp\nruntime\tplan\tplan\tfulcrum/runtime/b.hpp\n")
        problems = check(manifest, src)
        if len(problems) != 1 or "module plan includes fulcrum/runtime/b.hpp" not in problems[0]:
            print(f"self-test: plan including runtime was not reported exactly once: {problems}", file=sys.stderr)
            return 1
        manifest.write_text("runtime\tplan\tplan\tfulcrum/runtime/b.hpp\nplan\t\t\tfulcrum/plan/a.hpp\n")
        if not any("not below it" in p for p in check(manifest, src)):
            print("self-test: a dep declared after its user was not reported", file=sys.stderr)
            return 1
    print("self-test: ok")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(Path(sys.argv[1]), Path(sys.argv[2]))
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} include(s) break the module layering", file=sys.stderr)
        return 1
    print("check_layering: every include follows the module layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
