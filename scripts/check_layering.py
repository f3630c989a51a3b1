#!/usr/bin/env python3
"""Checks the module layering: every `#include "fulcrum/..."` of a module's file (sources, headers, tests)
names a header of the module itself or of a module it may use: its declared deps and, through them, their
PUBLIC deps. The declarations come from src/fulcrum/CMakeLists.txt, which writes them to
build/<preset>/fulcrum_modules.tsv (one line per module: name, deps, public deps, files; lists comma-separated)
and refuses a dep that is not declared before the module, so the list is the layering order.

Also a ceiling on function length: no function defined in a .cpp file under SRC_DIR or the further
directories (the CLI's apps/), tests (*_test.cpp) aside, is longer than 80 lines, counted from the first
line of its signature to its closing brace, lambdas and local classes inside it included. A function that
does several jobs in sequence is split into named phases; one where that would hurt clarity (a kernel's
inner loop, a big table) says why in a comment line directly above it (in the comment block that ends at
the definition or at its `template <...>` line) that starts with the marker `long:` and gives the reason:

    // long: the register-blocked product reads best as one loop nest; its phases share every index.
    void block_product(...) {

A definition is found as clang-format writes it: a line that is not a control statement or a class,
namespace or enum head, whose statement (that line and its more indented continuation lines) holds a
`(`...`)` and ends in `{`; it ends at the matching `}` (comments, strings, character literals and raw
strings are skipped when braces are matched).

  check_layering.py MANIFEST SRC_DIR [DIR...]   exit 1 and one line per offending include or long function
  check_layering.py --self-test                 shows that a lower module including a higher one, and a
                                                long function without its why, are caught
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](fulcrum/[^">]+)[">]', re.MULTILINE)

MAX_FUNCTION_LINES = 80
LONG_MARKER = re.compile(r"^\s*//\s*long:\s*\S")
# Statements whose braces open something other than a function body.
NOT_A_FUNCTION = re.compile(
    r"^(if|else|for|while|do|switch|case|default|try|catch|return|namespace|class|struct|union|enum|using|typedef|"
    r"static_assert|template|public|private|protected)\b")
RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^()\\ \t\n]{0,16})\(')


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


def digit_separator(text: str, i: int) -> bool:
    """Whether the ' at text[i] separates digits (60'000) rather than opening a character literal (u8'x')."""
    k = i
    while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'"):
        k -= 1
    return k < i and text[k].isdigit()


def blank_comments_and_literals(text: str) -> str:
    """`text` with the insides of comments, string and character literals and raw strings turned to spaces
    (newlines kept), so that braces and parentheses in them do not count and lines keep their numbers."""
    out = list(text)
    i, n = 0, len(text)

    def blank(begin: int, end: int) -> None:
        for k in range(begin, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif (raw := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = n if close < 0 else close + len(raw.group(1)) + 2
            blank(raw.end(), end - 1)
            i = end
        elif c == '"' or (c == "'" and not digit_separator(text, i)):
            k = i + 1
            while k < n and text[k] != c and text[k] != "\n":
                k += 2 if text[k] == "\\" else 1
            blank(i + 1, k)
            i = k + 1
        else:
            i += 1
    return "".join(out)


def functions(text: str) -> list[tuple[int, int, str]]:
    """The function definitions of a C++ source as (first line, lines, name), lines counted from the first
    line of the signature to the closing brace; what is defined inside a function counts toward it."""
    code = blank_comments_and_literals(text)
    lines = code.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    found = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        indent = len(lines[i]) - len(lines[i].lstrip())
        if not stripped or stripped.startswith(("#", "}", ")", ":", ",")) or NOT_A_FUNCTION.match(stripped):
            i += 1
            continue
        # The statement: this line and its more indented continuation lines, up to a `{` or `;` at a line end.
        j = i
        while True:
            tail = lines[j].rstrip()
            if tail.endswith(("{", ";", "}")) or j + 1 >= len(lines) or j - i >= 30:
                break
            following = lines[j + 1]
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            j += 1
        statement = " ".join(line.strip() for line in lines[i:j + 1])
        head = statement.split("(")[0]
        if (not statement.endswith("{") or "(" not in statement or ")" not in statement or ";" in statement
                or re.search(r"\s=\s|=\s*[\[{]", head)):
            i += 1
            continue
        depth, k = 0, offsets[j] + len(lines[j].rstrip()) - 1  # the opening brace
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        last = code.count("\n", 0, k)
        name = re.findall(r"([~\w:]+(?:operator\s*\S+?)?)\s*\(", statement)
        found.append((i + 1, last - i + 1, name[0] if name else statement[:40]))
        i = last + 1
    return found


def has_why(lines: list[str], first: int) -> bool:
    """Whether the comment block directly above line `first` (1-based; `template <...>` lines between
    them allowed) holds a `// long: REASON` line."""
    k = first - 2
    while k >= 0 and lines[k].strip().startswith("template"):
        k -= 1
    while k >= 0 and lines[k].strip().startswith("//"):
        if LONG_MARKER.match(lines[k]):
            return True
        k -= 1
    return False


def check_function_lengths(roots: list[Path]) -> list[str]:
    problems = []
    for root in roots:
        for path in sorted(root.rglob("*.cpp")):
            if path.name.endswith("_test.cpp"):
                continue
            text = path.read_text()
            lines = text.split("\n")
            for first, length, name in functions(text):
                if length > MAX_FUNCTION_LINES and not has_why(lines, first):
                    shown = path.relative_to(root.parent)
                    problems.append(f"{shown}:{first}: {name} is {length} lines, over the ceiling of "
                                    f"{MAX_FUNCTION_LINES}: split it into named phases, or say why not in a "
                                    f"'// long: REASON' comment directly above it")
    return problems


def self_test_function_lengths(tmp: Path) -> int:
    root = tmp / "lengths" / "src"
    (root / "fulcrum/m").mkdir(parents=True)

    def statements(count: int, indent: str) -> str:
        return "".join(f"{indent}x += {i};\n" for i in range(count))

    # Exactly at the ceiling: 80 lines with the signature and the closing brace.
    fits = "int fits(int x) {\n" + statements(78, "  ") + "}\n\n"
    # 87 lines: a two-line signature, a lambda (which counts toward it), a #pragma at column 0, braces in a
    # string, a raw string, a comment and a character literal that must not end it early, a digit separator.
    long_one = ("// Does one thing.\nstd::vector<int> long_one(int x,\n                          int y) {\n"
                "  auto f = [&](int z) {\n" + statements(77, "    ") + "    return z;\n  };\n"
                "#pragma omp parallel for\n  const char* s = \"}\" R\"x(\")}\")x\";  // }\n"
                "  x += 18'000 + u8'{';\n  return {f(x), s[0]};\n}\n\n")
    excused = ("// Does one thing.\n// long: one loop nest reads best whole.\ntemplate <class T>\n"
               + long_one.split("\n", 1)[1].replace("long_one", "excused"))
    # A member function of a class in a .cpp file, one line over the ceiling.
    member = "class S {\n public:\n  int member(int x) const {\n" + statements(78, "    ") + "    return x;\n  }\n};\n"
    (root / "fulcrum/m/a.cpp").write_text("namespace {\n\n" + fits + long_one + excused + member + "}  // namespace\n")
    (root / "fulcrum/m/a_test.cpp").write_text(long_one)  # tests are not held to the ceiling
    problems = check_function_lengths([root])
    expected = ["src/fulcrum/m/a.cpp:85: long_one is 87 lines", "src/fulcrum/m/a.cpp:266: member is 81 lines"]
    if len(problems) != len(expected) or not all(p.startswith(e) for p, e in zip(problems, expected, strict=True)):
        print(f"self-test: expected exactly {expected}, got {problems}", file=sys.stderr)
        return 1
    (root / "fulcrum/m/a.cpp").write_text(long_one.replace("// Does one thing.", "// long:"))
    if len(check_function_lengths([root])) != 1:
        print("self-test: a 'long:' comment with no reason excused a long function", file=sys.stderr)
        return 1
    return 0


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
        if self_test_function_lengths(src) != 0:
            return 1
    print("self-test: ok")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(Path(sys.argv[1]), Path(sys.argv[2]))
    long_functions = check_function_lengths([Path(d) for d in sys.argv[2:]])
    for p in problems + long_functions:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} include(s) break the module layering", file=sys.stderr)
    if long_functions:
        print(f"check_layering: {len(long_functions)} function(s) over {MAX_FUNCTION_LINES} lines without a why",
              file=sys.stderr)
    if problems or long_functions:
        return 1
    print(f"check_layering: every include follows the module layering; no function is over {MAX_FUNCTION_LINES} "
          "lines without a why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
