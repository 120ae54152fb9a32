"""docs/architecture.md's floors are the code's: every module placed, none importing a higher
floor's (a floor's own modules and the lower ones only), no import circle. Read from the
page's table and the modules' own imports (ast), no server."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mysql_state"


def floors() -> dict[str, int]:
    """module (top-level name under mysql_state) -> floor, from the page's table; "apart" is 0."""
    out: dict[str, int] = {}
    floor = None
    table = (ROOT / "docs" / "architecture.md").read_text().split("## The floors", 1)[1].split("\n\n", 2)[1]
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if cells[0]:
            head = cells[0].split()[0]
            floor = 0 if head == "apart" else int(head)
        named = re.sub(r"\([^)]*\)", "", cells[1])  # "(`checkpoint.py` ...)": a sub-package's own modules
        for name in re.findall(r"`([\w/]+?)(?:\.py|/)`", named):
            out[name] = floor
    return out


def imports() -> dict[str, set[str]]:
    """module -> the package's top-level modules it imports (relative or absolute)."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("").parts
        top = rel[0]
        found = out.setdefault(top, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                inside = len(rel) - node.level  # how deep the target sits: 0 = the package itself
                if inside == 0 and node.module:
                    found.add(node.module.split(".")[0])
                elif inside == 0:
                    found.update(a.name for a in node.names)
                else:  # within a sub-package (langgraph/): its own modules
                    found.add(rel[0])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mysql_state."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("mysql_state."))
        found.discard(top)
    return out


def test_every_module_has_its_floor_and_imports_none_above_it():
    placed, used = floors(), imports()
    modules = {m for m in used if m not in ("__init__", "__main__")}
    assert modules - set(placed) == set(), "modules the page does not place"
    assert set(placed) - modules == set(), "modules the page names that do not exist"
    upward = sorted((m, t, placed[m], placed[t]) for m in modules for t in used[m]
                    if t in placed and placed[m] != 0 and placed[t] > placed[m])
    assert upward == [], f"imports of a higher floor (module, imported, floors): {upward}"


def test_no_import_circle_between_floors():
    placed, used = floors(), imports()
    # within a floor, modules may import each other, but never round: a cycle is a knot
    graph = {m: {t for t in used.get(m, ()) if t in placed} for m in placed}
    state: dict[str, int] = {}

    def visit(m: str, path: list) -> None:
        state[m] = 1
        for t in graph[m]:
            assert state.get(t) != 1, f"an import circle: {' -> '.join(path + [m, t])}"
            if t not in state:
                visit(t, path + [m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


def test_statement_placeholders_are_filled_in_sql_py_only():
    """SQL in one place: a statement's placeholders (``{t}``, ``{ids}``, ``{db}``, ...) are filled
    by sql.py's builders (``render``, ``with_ids``, ``in_database``, ...), never by a module's own
    ``.replace("{...}")``. The throwaway servers (apart) are not the library's SQL."""
    apart = {"server.py", "cluster.py", "sql.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in apart:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""\.replace\(\s*["']\{\w+\}["']""", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "placeholders filled outside sql.py:\n" + "\n".join(found)


#: The whole package's type hints are checked (mypy, a test dependency): the facade, the
#: engines below it and the integrations, against the third-party packages installed (those
#: missing are taken as untyped), so no hint can quietly go wrong. A ``# type: ignore`` in the
#: package names its error code and says why (a third party's typing, an optional import).
TYPED = [PACKAGE]


def test_the_whole_package_type_checks():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                           "--no-incremental", *map(str, TYPED)],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, done.stdout + done.stderr
