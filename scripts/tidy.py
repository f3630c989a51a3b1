#!/usr/bin/env python3
"""clang-tidy over the library's sources, skipping a file whose last clean run saw exactly the same input.

A result cache in the manner of ccache: a source's key hashes clang-tidy's version, .clang-tidy, the
source's compile command and the contents of every file it includes (the build's own dependency list,
`ninja -t deps`). A file that passed with that key before is not checked again; any change to it, to a
header it includes, to its flags, to the configuration or to the tool makes a new key and a real run.
Only clean results are kept, so a finding is reported on every run until it is fixed. Written here because
no packaged tool does this for clang-tidy (run-clang-tidy re-checks everything: 3-8 minutes of CI's 2 cores).

    python3 scripts/tidy.py BUILD_DIR [--jobs N] [--no-cache] [-- extra clang-tidy args, e.g. -fix]
    python3 scripts/tidy.py --self-test      (ctest tidy_cache.self_test)

Cache: $FULCRUM_TIDY_CACHE, else ~/.cache/fulcrum-tidy. Exit 1 on any finding.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_SOURCE = re.compile(r"/src/fulcrum/.*(?<!_test)\.cpp$")
NOISE = re.compile(r"^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|"
                   r"^Use -header-filter|^$")


def tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    sys.exit(f"tidy: none of {', '.join(names)} on PATH (scripts/setup.sh installs clang-tidy-14)")


def dependencies(build: Path) -> dict[str, list[str]]:
    """Object path (relative to the build folder) -> the files its compile read, from ninja's deps log."""
    return parse_deps(subprocess.run(["ninja", "-C", str(build), "-t", "deps"], check=True, capture_output=True,
                                     text=True).stdout)


def parse_deps(text: str) -> dict[str, list[str]]:
    deps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            current = deps.setdefault(line.split(":", 1)[0], [])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return deps


class Hasher:
    """File contents hashed once each, however many sources include them."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def file(self, path: str) -> str:
        if path not in self.known:
            try:
                self.known[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                self.known[path] = "missing"
        return self.known[path]


def input_key(version: str, config: bytes, command: str, directory: str, files: list[str], hasher: Hasher,
              root: str = str(ROOT)) -> str:
    """What clang-tidy's answer for one source depends on: the tool, its configuration, the compile command
    and the contents of every file the compile read (the source among them). Paths inside the checkout are
    named relative to it, so another clone of the same tree (CI's) has the same keys."""
    def relative(text: str) -> str:
        return text.replace(root, "<checkout>")

    digest = hashlib.sha256(version.encode() + b"\0" + config + b"\0" + relative(command).encode())
    for path in sorted(files):
        name = relative(str(Path(directory, path).resolve()))
        digest.update(b"\0" + name.encode() + b"\0" + hasher.file(str(Path(directory, path))).encode())
    return digest.hexdigest()


def self_test() -> int:
    """The key changes with each thing it depends on, and only with those."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        source, header = Path(folder, "a.cpp"), Path(folder, "a.hpp")
        source.write_text('#include "a.hpp"\n')
        header.write_text("int f();\n")

        def key(version: str = "14", config: bytes = b"Checks: x", command: str = "c++ -c a.cpp",
                root: str = folder) -> str:
            return input_key(version, config, command, folder, ["a.cpp", "a.hpp"], Hasher(), root)

        base = key()
        # Another clone of the same files: the same key.
        with tempfile.TemporaryDirectory() as clone:
            for file in (source, header):
                Path(clone, file.name).write_text(file.read_text())
            assert input_key("14", b"", f"c++ -I{clone} -c a.cpp", clone, ["a.cpp", "a.hpp"], Hasher(), clone) == \
                input_key("14", b"", f"c++ -I{folder} -c a.cpp", folder, ["a.cpp", "a.hpp"], Hasher(), folder)
        assert key() == base, "the same input gave another key"
        assert key(version="15") != base and key(config=b"Checks: y") != base and key(command="c++ -O2") != base
        header.write_text("int* f();\n")
        assert key() != base, "a changed header kept its includer's key"
        header.write_text("int f();\n")
        assert key() == base
        assert object_of("ccache c++ -o src/a.cpp.o -c a.cpp") == "src/a.cpp.o" and object_of("c++ -c a.cpp") is None
    parsed = parse_deps("src/a.o: #deps 2, deps mtime 1 (VALID)\n    ../a.cpp\n    ../a.hpp\n\nb.o: #deps 0\n")
    assert parsed == {"src/a.o": ["../a.cpp", "../a.hpp"], "b.o": []}, parsed
    print("tidy.py self-test: ok")
    return 0


def object_of(command: str) -> str | None:
    words = shlex.split(command)
    return words[words.index("-o") + 1] if "-o" in words[:-1] else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser.add_argument("build", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-cache", action="store_true", help="check every file, keep nothing")
    parser.add_argument("tidy_args", nargs="*", help="passed to clang-tidy (after --); disables the cache")
    args = parser.parse_args()
    build = args.build.resolve()
    database = build / "compile_commands.json"
    if not database.is_file():
        print(f"tidy: no {database} (configure first)", file=sys.stderr)
        return 2
    clang_tidy = tool("clang-tidy-14", "clang-tidy")
    use_cache = not args.no_cache and not args.tidy_args
    cache = Path(os.environ.get("FULCRUM_TIDY_CACHE", Path.home() / ".cache" / "fulcrum-tidy"))
    cache.mkdir(parents=True, exist_ok=True)

    entries = [e for e in json.loads(database.read_text()) if LIBRARY_SOURCE.search(e["file"])]
    version = subprocess.run([clang_tidy, "--version"], check=True, capture_output=True, text=True).stdout
    config = (ROOT / ".clang-tidy").read_bytes()
    deps = dependencies(build) if use_cache else {}
    hasher = Hasher()

    def key(entry: dict[str, str]) -> str | None:
        target = object_of(entry["command"])
        if target is None or target not in deps:
            return None  # never built: no dependency list, so no key; checked every time
        return input_key(version, config, entry["command"], entry["directory"], deps[target], hasher)

    keys = {e["file"]: key(e) for e in entries} if use_cache else {}
    todo = [e for e in entries if not (keys.get(e["file"]) and (cache / keys[e["file"]]).exists())]

    def check(entry: dict[str, str]) -> tuple[str, int, str]:
        run = subprocess.run([clang_tidy, "-p", str(build), "--quiet", *args.tidy_args, entry["file"]],
                             capture_output=True, text=True)
        output = "\n".join(line for line in (run.stdout + run.stderr).splitlines() if not NOISE.search(line))
        return entry["file"], run.returncode, output

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for file, status, output in pool.map(check, todo):
            if output:
                print(output, flush=True)
            if status != 0:
                failed.append(file)
            elif keys.get(file):
                (cache / str(keys[file])).touch()
    print(f"tidy: {len(entries)} sources, {len(entries) - len(todo)} unchanged since a clean run, "
          f"{len(todo)} checked")
    if failed:
        print(f"tidy: findings in {len(failed)} file(s) above", file=sys.stderr)
        return 1
    print("tidy: no findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
