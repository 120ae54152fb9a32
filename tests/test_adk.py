"""The Google ADK adapter, in its own virtualenv (``.venv-adk``, built with
``pip install -e '.[adk,test]'``; ADK pins an older OpenTelemetry than AgentScope's extra
needs): runs tests/adk_inner/cases_*.py there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.isolated import ROOT, framework_python, run_cases

VENV = Path(os.environ.get("ADK_VENV", ROOT / ".venv-adk"))


@pytest.fixture(scope="session")
def adk_python() -> Path:
    return framework_python(VENV, "adk", "__import__('google.adk', fromlist=['x']).__version__", "2.")


def test_adk_cases_pass_in_their_own_virtualenv(adk_python: Path, url: str) -> None:
    for cases in sorted((ROOT / "tests" / "adk_inner").glob("cases_*.py")):
        run_cases(adk_python, cases, url, "Google ADK")
