#!/usr/bin/env python3
"""No planner name in the simulator or the runtime: `check_planner_names.py PATH_TO_FULCRUM SRC_DIR`.

What sim/ and runtime/ do differently per strategy must come from the planner's declared capabilities
(planners/planner.hpp), so a registered planner's name may not appear there as a string literal outside
comments. Tests are exempt: they pick planners to exercise by name. The names come from the binary's
registry (`fulcrum plan --help`), so a newly registered planner is checked too.
"""
import pathlib
import re
import subprocess
import sys

fulcrum, src = sys.argv[1], pathlib.Path(sys.argv[2])
help_text = subprocess.run([fulcrum, "plan", "--help"], capture_output=True, text=True, check=True).stdout
listed = re.search(r"comma-separated: ([a-z0-9, -]+)", help_text)
if not listed:
    sys.exit("check_planner_names: `fulcrum plan --help` does not list the planners")
names = [n.strip() for n in listed.group(1).split(",")]


def code_only(text):
    """The text with // and /* */ comments blanked (string literals kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            i = text.find("\n", i) if text.find("\n", i) >= 0 else n
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 2
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


problems = []
for folder in ("sim", "runtime"):
    for path in sorted((src / folder).rglob("*")):
        if path.suffix not in (".cpp", ".hpp") or path.stem.endswith("_test"):
            continue
        code = code_only(path.read_text())
        problems += [f'{path}: planner name "{name}" as a string literal' for name in names if f'"{name}"' in code]
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"check_planner_names: none of {', '.join(names)} appears in sim/ or runtime/")
