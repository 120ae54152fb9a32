"""AgentScope 1.0.x, in its own virtualenv: 1.x and 2.x are both imported as ``agentscope`` and
cannot share one. The set-up creates ``.venv-agentscope1`` with ``pip install -e
'.[agentscope1,test]'`` (reused while setup.cfg is unchanged), then runs
tests/agentscope1_inner/cases_agentscope1.py there, on the same server (MYSQL_URL)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("AGENTSCOPE1_VENV", ROOT / ".venv-agentscope1"))
CASES = ROOT / "tests" / "agentscope1_inner" / "cases_agentscope1.py"


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="session")
def agentscope1_python() -> Path:
    """The 1.x virtualenv's python; skips (with pip's output) only if the extra cannot install."""
    stamp = hashlib.sha256((ROOT / "setup.cfg").read_bytes()).hexdigest()[:16]
    marker = VENV / f".installed-{stamp}"
    py = _venv_python()
    if marker.exists() and py.exists():
        return py
    steps = [[sys.executable, "-m", "venv", str(VENV)],
             [str(py), "-m", "pip", "install", "-q", "-e", f"{ROOT}[agentscope1,test]"]]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            pytest.skip(f"cannot install the agentscope1 extra ({' '.join(cmd[-3:])}):\n{tail}")
    check = subprocess.run([str(py), "-c", "import agentscope; print(agentscope.__version__)"],
                           capture_output=True, text=True, timeout=120)
    if check.returncode or not check.stdout.startswith("1.0"):
        pytest.skip(f"the agentscope1 extra installed but does not import: {check.stdout}{check.stderr[-2000:]}")
    marker.touch()
    return py


def test_agentscope1_cases_pass_in_their_own_virtualenv(agentscope1_python: Path, url: str) -> None:
    env = dict(os.environ, MYSQL_URL=url, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(agentscope1_python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(CASES)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    output = done.stdout + done.stderr
    print(output)  # shown with -s or on failure
    assert done.returncode == 0, f"the AgentScope 1.x cases failed:\n{output}"
    assert " passed" in output and "skipped" not in output.split("short test summary")[-1].lower(), output
    assert "1.0" in subprocess.run([str(agentscope1_python), "-c", "import agentscope; print(agentscope.__version__)"],
                                   capture_output=True, text=True).stdout
