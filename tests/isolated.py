"""Frameworks whose dependencies conflict with the main environment's run in a virtualenv of
their own, built by the test itself (``pip install -e '.[<extra>,test]'``), reused while
setup.cfg is unchanged, and driven on the same server through ``MYSQL_URL``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent


#: The framework virtualenvs and their extras; ``python tests/isolated.py`` builds them all at
#: once (``make test`` does, before pytest: side by side they take the time of the slowest).
FRAMEWORKS = {".venv-agentscope1": "agentscope1", ".venv-openai-agents": "openai-agents", ".venv-adk": "adk"}


def _stamp() -> str:
    return hashlib.sha256((ROOT / "setup.cfg").read_bytes()).hexdigest()[:16]


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install(venv: Path, extra: str) -> Optional[str]:
    """Create the virtualenv and install the extra (once per setup.cfg); pip's error, or None."""
    built = venv / f".built-{_stamp()}"
    if built.exists() and _python(venv).exists():
        return None
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(_python(venv)), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{extra},test]"]]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            return f"cannot install the {extra} extra ({' '.join(cmd[-3:])}):\n{tail}"
    built.touch()
    return None


def framework_python(venv: Path, extra: str, check: str, expect: str) -> Path:
    """The virtualenv's python; skips (with pip's output) only if the extra cannot install.

    ``check`` is a python expression printed by the venv's interpreter, which must start
    with ``expect`` (e.g. the framework's version).
    """
    marker = venv / f".installed-{_stamp()}"
    py = _python(venv)
    if marker.exists() and py.exists():
        return py
    error = install(venv, extra)
    if error:
        pytest.skip(error)
    probe = subprocess.run([str(py), "-c", f"print({check})"], capture_output=True, text=True, timeout=300)
    if probe.returncode or not probe.stdout.startswith(expect):  # installed but broken: a failure, not a skip
        pytest.fail(f"the {extra} extra installed but does not import as expected ({expect}...): "
                    f"{probe.stdout}{probe.stderr[-2000:]}")
    marker.touch()
    return py


def run_cases(python: Path, cases: Path, url: str, what: str) -> str:
    """Run one inner case file with the venv's pytest; fails with its output, returns it."""
    env = dict(os.environ, MYSQL_URL=url, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(cases)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    output = done.stdout + done.stderr
    print(output)  # shown with -s or on failure
    assert done.returncode == 0, f"the {what} cases failed:\n{output}"
    assert " passed" in output and "skipped" not in output.split("short test summary")[-1].lower(), output
    return output


def main() -> int:
    """Build every framework virtualenv side by side (errors are left to the tests to report)."""
    started = time.monotonic()
    results: dict[str, Optional[str]] = {}

    def build(name: str, extra: str) -> None:
        results[name] = install(ROOT / name, extra)

    threads = [threading.Thread(target=build, args=item) for item in FRAMEWORKS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, error in results.items():
        print(f"{name}: {'ready' if error is None else error.splitlines()[0]}")
    print(f"framework virtualenvs: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
