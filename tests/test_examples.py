"""``make demo``'s script and every script in ``examples/``, run end to end as real processes on
the test server (``MYSQL_URL``), so the README's first commands cannot break unseen.

Scripts are discovered by globbing ``examples/*.py``: a new example is run automatically. Each
runs with the first interpreter that can import what it imports at module level: this
environment's, else a framework virtualenv of :mod:`tests.isolated` (built on first use). An
example that no known environment can run fails (it never skips), and so does one whose output
this module does not know how to check (add it to ``EXPECTED``). A file of ``examples/`` with no
``__main__`` block is a shared helper: it must be imported by a runnable example.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.isolated import FRAMEWORKS, ROOT, install

DEMO = ROOT / "benchmarks" / "demo.py"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

#: What each script's output must show (beyond exit status 0), by path from the repository root.
EXPECTED = {
    "benchmarks/demo.py": [
        "[saved: full write:", "[saved: append:", "[saved: changed rows only:", "[saved: shorter list:",
        "stored state == agent.state: True", "deleted bob/chat-9 -> bob: []", "done in",
    ],
    "examples/openai_agents_restart.py": ["process 2: the model was shown 3 message(s)",
                                          "the second process saw the first one's turn: yes"],
    "examples/adk_restart.py": ["process 2: the model was shown 3 message(s)",
                                "the second process saw the first one's turn: yes"],
    "examples/langgraph_demo.py": ["resumed with 'yes'", "Cancelled", "SESSION"],
}


def _module_imports(path: Path) -> list[str]:
    """The import statements a script runs at module level (inside a top-level try too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = list(tree.body)
    out = []
    while body:
        node = body.pop(0)
        if isinstance(node, ast.Try):
            body[:0] = node.body
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                out.append(ast.unparse(node))
    return out


def _is_script(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


def _can_import(python: Path, script: Path) -> bool:
    """Whether ``python`` runs every module-level import of ``script`` (its folder on the path)."""
    probe = "import sys; sys.path.insert(0, %r)\n" % str(script.parent) + "\n".join(_module_imports(script))
    done = subprocess.run([str(python), "-c", probe], cwd=ROOT, env=_env(None), capture_output=True, text=True,
                          timeout=300)
    return done.returncode == 0


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _env(url: Optional[str]) -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    if url is not None:
        env["MYSQL_URL"] = url
    return env


_CHOSEN: dict[Path, Path] = {}


def interpreter(script: Path) -> Path:
    """The first known interpreter that imports what ``script`` imports; fails if none does."""
    if script in _CHOSEN:
        return _CHOSEN[script]
    tried = []
    candidates = [("this environment", lambda: (Path(sys.executable), None))]
    for name, extra in FRAMEWORKS.items():
        candidates.append((name, lambda name=name, extra=extra: (_venv_python(ROOT / name), install(ROOT / name, extra))))
    for label, make in candidates:
        python, error = make()
        if error is not None:
            tried.append(f"{label}: {error.splitlines()[0]}")
            continue
        if _can_import(python, script):
            _CHOSEN[script] = python
            return python
        tried.append(f"{label}: cannot import what it imports")
    pytest.fail(f"{script.relative_to(ROOT)} is runnable in no known environment ({'; '.join(tried)}); "
                "add its framework to tests/isolated.py's FRAMEWORKS", pytrace=False)


def _scripts() -> list[Path]:
    return [DEMO] + [p for p in EXAMPLES if _is_script(p)]


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_script_runs_end_to_end(script: Path, url: str) -> None:
    """The script, run as ``python <script>`` would, exits 0 and shows what it promises."""
    name = str(script.relative_to(ROOT))
    python = interpreter(script)
    done = subprocess.run([str(python), str(script)], cwd=ROOT, env=_env(url), capture_output=True, text=True,
                          timeout=900)
    output = done.stdout + done.stderr
    print(output)  # shown with -s or on failure
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{output[-4000:]}"
    assert "Traceback" not in output, output[-4000:]
    expected = EXPECTED.get(name)
    assert expected is not None, (f"{name} ran, but tests/test_examples.py does not know what its output must "
                                  "show: add it to EXPECTED")
    missing = [text for text in expected if text not in done.stdout]
    assert not missing, f"{name}'s output lacks {missing}:\n{done.stdout[-4000:]}"


def test_every_example_file_is_a_script_or_a_helper_of_one() -> None:
    """A file of examples/ that is not a script is imported by one that is (else nothing runs it)."""
    assert EXAMPLES, "examples/ holds no script"
    scripts = [p for p in EXAMPLES if _is_script(p)]
    imported = {stmt.split()[1].split(".")[0] for p in scripts for stmt in _module_imports(p)}
    orphans = [p.name for p in EXAMPLES if not _is_script(p) and p.stem not in imported]
    assert not orphans, f"examples {orphans} have no __main__ block and no example imports them: nothing runs them"


def test_known_outputs_belong_to_scripts_that_exist() -> None:
    """EXPECTED names only scripts that exist (a renamed example must not leave its check behind)."""
    names = {str(p.relative_to(ROOT)) for p in _scripts()}
    assert set(EXPECTED) <= names, sorted(set(EXPECTED) - names)
