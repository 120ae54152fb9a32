"""Every Python example in README.md and docs/*.md runs, against the test server.

A page's ```python blocks run in order as one script (a reader follows them so), in a real
process, with ``MYSQL_URL`` naming a fresh database of the test server. Pages about a framework
whose dependencies cannot share the main environment run in that framework's virtualenv (built
by ``tests/isolated.py``). A page whose examples fail fails here; nothing is skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.isolated import FRAMEWORKS, ROOT, framework_python

BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
PAGES = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if BLOCK.search(p.read_text())]
#: Pages whose examples need a framework virtualenv: page stem -> (venv, import check, expected).
VENV_OF = {
    "adk": (".venv-adk", "__import__('google.adk').adk.__version__", ""),
    "openai-agents": (".venv-openai-agents", "__import__('agents').__name__", "agents"),
    "agentscope1": (".venv-agentscope1", "__import__('agentscope').__version__", "1.0"),
}


def script_of(page: Path) -> str:
    parts = []
    for n, match in enumerate(BLOCK.finditer(page.read_text()), 1):
        parts.append(f"# ---- {page.name}, example {n}\n{match.group(1)}")
    return "\n".join(parts)


def python_for(page: Path) -> str:
    if page.stem not in VENV_OF:
        return sys.executable
    venv, check, expect = VENV_OF[page.stem]
    return str(framework_python(ROOT / venv, FRAMEWORKS[venv], check, expect))


def test_every_docs_page_is_found():
    """The docs folder exists and its pages are picked up (a rename cannot hide them)."""
    assert (ROOT / "docs").is_dir()
    assert any(p.parent.name == "docs" for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_of_the_page_run(page: Path, url: str, database: str, tmp_path: Path):
    script = tmp_path / f"{page.stem}_examples.py"
    script.write_text(script_of(page))
    env = dict(os.environ, MYSQL_URL=url.rstrip("/") + "/" + database, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    done = subprocess.run([python_for(page), str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"the examples of {page.name} failed:\n{done.stdout[-3000:]}{done.stderr[-5000:]}"
