"""The OpenAI Agents SDK adapter, in its own virtualenv (``.venv-openai-agents``, built with
``pip install -e '.[openai-agents,test]'``): runs tests/openai_agents_inner/cases_*.py there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.isolated import ROOT, case_names, check_case, framework_python, run_cases

VENV = Path(os.environ.get("OPENAI_AGENTS_VENV", ROOT / ".venv-openai-agents"))


@pytest.fixture(scope="session")
def openai_agents_python() -> Path:
    return framework_python(VENV, "openai-agents", "__import__('agents').__version__", "0.")


CASES = ROOT / "tests" / "openai_agents_inner"


@pytest.fixture(scope="session")
def openai_agents_results(openai_agents_python: Path, url: str) -> dict:
    """Every case run once, in the framework's virtualenv, on the test server."""
    return run_cases(openai_agents_python, CASES, url, "OpenAI Agents SDK")


def test_openai_agents_case_file_has_cases() -> None:
    assert case_names(CASES), f"no test_* case in {CASES}/cases_*.py"


@pytest.mark.parametrize("case", case_names(CASES))
def test_openai_agents(case: str, openai_agents_results: dict) -> None:
    check_case(openai_agents_results, case, "OpenAI Agents SDK")
