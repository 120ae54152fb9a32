"""The Google ADK adapter, in its own virtualenv (``.venv-adk``, built with
``pip install -e '.[adk,test]'``; ADK pins an older OpenTelemetry than AgentScope's extra
needs): runs tests/adk_inner/cases_*.py there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.isolated import ROOT, case_names, check_case, framework_python, run_cases

VENV = Path(os.environ.get("ADK_VENV", ROOT / ".venv-adk"))


@pytest.fixture(scope="session")
def adk_python() -> Path:
    return framework_python(VENV, "adk", "__import__('google.adk', fromlist=['x']).__version__", "2.")


CASES = ROOT / "tests" / "adk_inner"


@pytest.fixture(scope="session")
def adk_results(adk_python: Path, url: str) -> dict:
    """Every case run once, in the framework's virtualenv, on the test server."""
    return run_cases(adk_python, CASES, url, "Google ADK")


def test_adk_case_file_has_cases() -> None:
    assert case_names(CASES), f"no test_* case in {CASES}/cases_*.py"


@pytest.mark.parametrize("case", case_names(CASES))
def test_adk(case: str, adk_results: dict) -> None:
    check_case(adk_results, case, "Google ADK")
