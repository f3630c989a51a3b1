#!/usr/bin/env python3
"""docs/cli.md's vocabulary table against every subcommand's --help, run by ctest:
`vocabulary_test.py PATH_TO_FULCRUM`.

Both ways: every option more than one subcommand takes has a row naming exactly the subcommands whose
--help lists it, and every default the row gives is the one --help shows.
"""
import collections
import os
import re
import subprocess
import sys

FULCRUM = os.path.abspath(sys.argv[1])
CLI_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "cli.md")
SUBCOMMANDS = ["plan", "run", "demo", "simulate", "profile", "heads", "prefill", "bench kernels", "bench comm",
               "models"]
GLOBAL = {"--help", "--quiet", "--verbose"}  # every subcommand's, described above the table
PLANNER_OPTIONS = "planner options"
DEPRECATED = "Deprecated (going in the next release)"  # option_aliases.hpp: old spellings, not vocabulary
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def help_options(subcommand):
    """{option: default or None} of the subcommand's --help, and whether it has the planner options group."""
    out = subprocess.run([FULCRUM, *subcommand.split(), "--help"], capture_output=True, text=True, timeout=60).stdout
    options, group, planner_group = {}, "", False
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            group = line[:-1]
            planner_group |= group == "Planner options"
            continue
        m = re.match(r"^\s+(?:-\w,)?(--[a-z0-9-]+)(?:\s+[A-Z]+(?::[A-Z]+)?(?:=(\S+))?)?", line)
        if m and group not in ("Planner options", DEPRECATED) and m.group(1) not in GLOBAL:
            options[m.group(1)] = m.group(2)
    return options, planner_group


def without_parentheses(text):
    out, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")"
    return "".join(out)


def table_rows():
    """{option: {subcommand: default or None}} from the Vocabulary section's table."""
    text = open(CLI_MD).read()
    section = text[text.index("## Vocabulary"):]
    section = section[:section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("option", "---"):
            continue
        names = re.findall(r"`(--[a-z0-9-]+)`", cells[0]) or [cells[0]]
        for name in names:
            rows[name] = {}
        for segment in without_parentheses(cells[2]).split(";"):
            subs, _, defaults = segment.partition(":")
            if not defaults.strip():
                values = [None] * len(names)
            else:  # a row of several options gives one default each, in order
                values = [v.strip() for v in defaults.split(",")] if len(names) > 1 else [defaults.strip()]
            check(len(values) == len(names), f"vocabulary row {cells[0]}: defaults {values} for {names}")
            for sub in (s.strip() for s in subs.split(",")):
                check(sub in SUBCOMMANDS, f"vocabulary row {cells[0]}: '{sub}' is not a subcommand")
                for name, value in zip(names, values, strict=False):  # a length mismatch is reported above
                    rows[name][sub] = value
    return rows


helps = {sub: help_options(sub) for sub in SUBCOMMANDS}
rows = table_rows()
taken_by = collections.defaultdict(dict)
for sub, (options, _) in helps.items():
    for option, default in options.items():
        taken_by[option][sub] = default
taken_by[PLANNER_OPTIONS] = {sub: None for sub, (_, group) in helps.items() if group}

for option, subs in sorted(taken_by.items()):
    if len(subs) > 1:
        check(option in rows, f"{option} is taken by {sorted(subs)} but has no row in docs/cli.md's vocabulary")
for option, row in sorted(rows.items()):
    subs = taken_by.get(option, {})
    check(set(row) == set(subs), f"vocabulary {option}: the table says {sorted(row)}, --help has {sorted(subs)}")
    for sub, default in row.items():
        if sub in subs:
            check(default == subs[sub], f"vocabulary {option} in {sub}: the table's default {default!r}, "
                                        f"--help's {subs[sub]!r}")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
