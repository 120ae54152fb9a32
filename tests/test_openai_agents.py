"""The OpenAI Agents SDK adapter, in its own virtualenv (``.venv-openai-agents``, built with
``pip install -e '.[openai-agents,test]'``): runs tests/openai_agents_inner/cases_*.py there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.isolated import ROOT, framework_python, run_cases

VENV = Path(os.environ.get("OPENAI_AGENTS_VENV", ROOT / ".venv-openai-agents"))


@pytest.fixture(scope="session")
def openai_agents_python() -> Path:
    return framework_python(VENV, "openai-agents", "__import__('agents').__version__", "0.")


def test_openai_agents_cases_pass_in_their_own_virtualenv(openai_agents_python: Path, url: str) -> None:
    for cases in sorted((ROOT / "tests" / "openai_agents_inner").glob("cases_*.py")):
        run_cases(openai_agents_python, cases, url, "OpenAI Agents SDK")
