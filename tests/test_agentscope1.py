"""AgentScope 1.0.x, in its own virtualenv: 1.x and 2.x are both imported as ``agentscope`` and
cannot share one. The set-up creates ``.venv-agentscope1`` with ``pip install -e
'.[agentscope1,test]'`` (reused while setup.cfg is unchanged), then runs
tests/agentscope1_inner/cases_agentscope1.py there, on the same server (MYSQL_URL)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.isolated import ROOT, case_names, check_case, framework_python, run_cases

VENV = Path(os.environ.get("AGENTSCOPE1_VENV", ROOT / ".venv-agentscope1"))
VERSION = "__import__('agentscope').__version__"


@pytest.fixture(scope="session")
def agentscope1_python() -> Path:
    """The 1.x virtualenv's python; skips (with pip's output) only if the extra cannot install."""
    return framework_python(VENV, "agentscope1", VERSION, "1.0")


CASES = ROOT / "tests" / "agentscope1_inner"


@pytest.fixture(scope="session")
def agentscope1_results(agentscope1_python: Path, url: str) -> dict:
    """Every case run once, in the framework's virtualenv, on the test server."""
    return run_cases(agentscope1_python, CASES, url, "AgentScope 1.x")


def test_agentscope1_case_file_has_cases() -> None:
    assert case_names(CASES), f"no test_* case in {CASES}/cases_*.py"


@pytest.mark.parametrize("case", case_names(CASES))
def test_agentscope1(case: str, agentscope1_results: dict) -> None:
    check_case(agentscope1_results, case, "AgentScope 1.x")
