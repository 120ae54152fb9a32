"""AgentScope 1.0.x, in its own virtualenv: 1.x and 2.x are both imported as ``agentscope`` and
cannot share one. The set-up creates ``.venv-agentscope1`` with ``pip install -e
'.[agentscope1,test]'`` (reused while setup.cfg is unchanged), then runs
tests/agentscope1_inner/cases_agentscope1.py there, on the same server (MYSQL_URL)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.isolated import ROOT, framework_python, run_cases

VENV = Path(os.environ.get("AGENTSCOPE1_VENV", ROOT / ".venv-agentscope1"))
CASES = ROOT / "tests" / "agentscope1_inner" / "cases_agentscope1.py"
VERSION = "__import__('agentscope').__version__"


@pytest.fixture(scope="session")
def agentscope1_python() -> Path:
    """The 1.x virtualenv's python; skips (with pip's output) only if the extra cannot install."""
    return framework_python(VENV, "agentscope1", VERSION, "1.0")


def test_agentscope1_cases_pass_in_their_own_virtualenv(agentscope1_python: Path, url: str) -> None:
    run_cases(agentscope1_python, CASES, url, "AgentScope 1.x")
    assert subprocess.run([str(agentscope1_python), "-c", f"print({VERSION})"],
                          capture_output=True, text=True).stdout.startswith("1.0")
