#!/usr/bin/env python3
"""Checks that docs/architecture.md describes the tree as it is.

  check_doc_paths.py REPO_ROOT     exit 1 listing every problem, else one line of success
  check_doc_paths.py --self-test   shows that a missing path, a missing module folder and a reference to a
                                   file outside the repository are each caught, and a true layout passes

The layout block is the first fenced block after the "## Layout" heading. Each of its lines that starts with
a path (a first token containing '/' or '.') names a file or folder (folders end in '/'); an indented entry
is relative to the nearest less-indented folder entry above it. Every such path must exist under REPO_ROOT
and stay inside it, and every folder directly under src/fulcrum/ (a module) must be named. The doc may not
point outside the repository: no "../shared" or "shared/" anywhere in it.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

DOC = Path("docs/architecture.md")
FORBIDDEN = ("../shared", "shared/")


def layout_lines(text: str) -> list[str] | None:
    """The lines of the first fenced block after the '## Layout' heading, or None when there is none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().lower().startswith("## layout")), None)
    if start is None:
        return None
    i = start + 1
    while i < len(lines) and not lines[i].startswith("```"):
        if lines[i].startswith("#"):
            return None  # the next section began before any block
        i += 1
    block: list[str] = []
    for line in lines[i + 1 :]:
        if line.startswith("```"):
            return block
        block.append(line)
    return None  # unterminated


def layout_paths(block: list[str]) -> list[str]:
    """The paths the block names, indented entries resolved against the folder entries above them."""
    paths: list[str] = []
    folders: list[tuple[int, str]] = []  # (indent, path) of the enclosing folder entries
    for line in block:
        if not line.strip():
            continue
        token = line.split()[0]
        if "/" not in token and "." not in token:
            continue
        indent = len(line) - len(line.lstrip(" "))
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + token
        paths.append(path)
        if token.endswith("/"):
            folders.append((indent, path))
    return paths


def problems(root: Path) -> list[str]:
    doc = root / DOC
    if not doc.is_file():
        return [f"{DOC}: not found under {root}"]
    text = doc.read_text(encoding="utf-8")
    found = [f"{DOC}: refers outside the repository ('{bad}')" for bad in FORBIDDEN if bad in text]
    block = layout_lines(text)
    if block is None:
        return [*found, f"{DOC}: no fenced block after a '## Layout' heading"]
    paths = layout_paths(block)
    if not paths:
        found.append(f"{DOC}: the layout block names no paths")
    for path in paths:
        target = (root / path).resolve()
        if Path(path).is_absolute() or ".." in Path(path).parts or not target.is_relative_to(root.resolve()):
            found.append(f"{DOC}: layout path {path} is outside the repository")
        elif not (target.is_dir() if path.endswith("/") else target.exists()):
            found.append(f"{DOC}: layout path {path} does not exist")
    named = {p.rstrip("/") for p in paths}
    modules = root / "src" / "fulcrum"
    if modules.is_dir():
        for folder in sorted(p for p in modules.iterdir() if p.is_dir()):
            relative = folder.relative_to(root).as_posix()
            if relative not in named:
                found.append(f"{DOC}: the layout does not name the module folder {relative}/")
    return found


def check(root: Path) -> int:
    found = problems(root)
    for p in found:
        print(p, file=sys.stderr)
    if found:
        return 1
    paths = layout_paths(layout_lines((root / DOC).read_text(encoding="utf-8")) or [])
    print(f"check_doc_paths: {DOC}'s layout names {len(paths)} paths, all present; no reference outside the repository")
    return 0


def self_test() -> int:
    good_doc = """# Doc
## Layout
Prose before the block.
```
README.md          top-level file
src/fulcrum/       library
  core/            a module
    error.hpp      a file inside it
  CMakeLists.txt   back one level
data/hardware/     nested in one token
```
## Next
"""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in ("README.md", "src/fulcrum/core/error.hpp", "src/fulcrum/CMakeLists.txt", "data/hardware/x.json"):
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text("")
        (root / "docs").mkdir()
        doc = root / DOC

        def run(text: str) -> list[str]:
            doc.write_text(text)
            return problems(root)

        cases: list[tuple[str, str, list[str]]] = [
            ("a true layout", good_doc, []),
            ("a missing file", good_doc.replace("error.hpp", "errors.hpp"),
             ["layout path src/fulcrum/core/errors.hpp does not exist"]),
            ("a file listed as a folder", good_doc.replace("README.md ", "README.md/"),
             ["layout path README.md/ does not exist"]),
            ("a module folder left out",
             good_doc.replace("  core/            a module\n    error.hpp      a file inside it\n", ""),
             ["does not name the module folder src/fulcrum/core/"]),
            ("a path outside the repository", good_doc.replace("README.md ", "../README.md "),
             ["layout path ../README.md is outside the repository"]),
            ("a reference to ../shared", good_doc + "See ../shared/DESIGN.md.\n",
             ["refers outside the repository ('../shared')", "refers outside the repository ('shared/')"]),
            ("no layout block", good_doc.replace("## Layout", "## Files"), ["no fenced block"]),
        ]
        failures = 0
        for name, text, expected in cases:
            got = run(text)
            ok = len(got) == len(expected) and all(e in g for e, g in zip(expected, got, strict=True))
            if not ok:
                print(f"self-test: {name}: expected {expected}, got {got}", file=sys.stderr)
                failures += 1
        if failures:
            return 1
    print(f"check_doc_paths self-test: ok ({len(cases)} cases: a true layout passes, each broken one is caught)")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    return check(Path(sys.argv[1]))


if __name__ == "__main__":
    sys.exit(main())
