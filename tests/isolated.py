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


def case_names(folder: Path) -> list[str]:
    """The cases of a framework's inner folder: ``<file>::<test>`` of every ``test_*`` function
    in its ``cases_*.py`` files, read from the source (so each becomes a test of its own here)."""
    import ast

    names = []
    for path in sorted(folder.glob("cases_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names += [f"{path.name}::{node.name}" for node in tree.body
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")]
    return names


def run_cases(python: Path, folder: Path, url: str, what: str) -> dict[str, tuple[str, str]]:
    """Run every inner case file of ``folder`` once with the venv's pytest (junit XML report):
    ``{"<file>::<test>": (outcome, details)}`` where outcome is passed / failed / error / skipped."""
    import tempfile
    import xml.etree.ElementTree as ET

    files = sorted(folder.glob("cases_*.py"))
    assert files, f"no case file in {folder}: the {what} cases are missing"
    env = dict(os.environ, MYSQL_URL=url, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        done = subprocess.run(
            [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", f"--junitxml={report}",
             *map(str, files)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
        )
        output = done.stdout + done.stderr
        print(output)  # shown with -s or on failure
        assert report.exists(), f"the {what} cases did not run:\n{output[-5000:]}"
        results: dict[str, tuple[str, str]] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('file') or Path(case.get('classname', '').replace('.', '/')).name + '.py'}"
            name = f"{Path(name).name}::{case.get('name')}"
            outcome, details = "passed", ""
            for tag in ("failure", "error", "skipped"):
                found = case.find(tag)
                if found is not None:
                    outcome = {"failure": "failed"}.get(tag, tag)
                    details = (found.get("message") or "") + "\n" + (found.text or "")
            results[name] = (outcome, details)
    return results


def check_case(results: dict[str, tuple[str, str]], name: str, what: str) -> None:
    """One inner case's verdict as this test's: a case that failed, was skipped, or did not run fails."""
    base = name.split("[")[0]
    mine = {k: v for k, v in results.items() if k == name or k.split("[")[0] == base}
    assert mine, f"the {what} case {name} did not run (collected: {sorted(results)[:20]})"
    bad = {k: v for k, v in mine.items() if v[0] != "passed"}
    assert not bad, "\n".join(f"{k}: {outcome}\n{details[-4000:]}" for k, (outcome, details) in bad.items())


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
