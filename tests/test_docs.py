"""Every Python example in README.md and docs/*.md runs, against the test server.

A page's ```python blocks run in order as one script (a reader follows them so), in a real
process, with ``MYSQL_URL`` naming a fresh database of the test server. Pages about a framework
whose dependencies cannot share the main environment run in that framework's virtualenv (built
by ``tests/isolated.py``). A page whose examples fail fails here; nothing is skipped.

Beside the examples, what a reader follows without running it stays true too: every relative
link of a page leads to a file that exists, every ``make`` target a page names is in the
Makefile, and the README stays a front page (short)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.isolated import FRAMEWORKS, ROOT, framework_python

BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
ALL_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [p for p in ALL_PAGES if BLOCK.search(p.read_text())]
#: A Markdown link or image target: ``[text](target)``, ``![alt](target)``.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: ``make <target>`` as code: in backticks, or (MAKE_LINE) a line of a shell block.
MAKE = re.compile(r"`make ([a-z][a-z0-9-]*)")
MAKE_LINE = re.compile(r"^[ \t]*make ([a-z][a-z0-9-]*)", re.M)
#: A test file (and test) a page cites as what shows a promise: ``tests/test_faults.py::test_x``.
CITED_TEST = re.compile(r"(tests/[\w/]+\.py)((?:::\w+)?)")
#: The README is the front page: what it is, the commands, a quick start, where to read on.
README_MAX_LINES = 220
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


def test_every_relative_link_leads_to_a_file():
    """A link of the README or a docs page (``docs/api.md``, ``../benchmarks/results/...``)
    names a file or folder of the repository; a page moved or renamed cannot leave a dead link."""
    dead = []
    for page in ALL_PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # an absolute URL, or an anchor in the same page
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert not dead, "links to nothing:\n" + "\n".join(dead)


def test_every_test_the_docs_cite_exists():
    """A page that says a promise is "shown by" ``tests/x.py::test_y`` names a file that exists
    and a test that is in it (tests regrouped or renamed cannot leave the docs citing nothing)."""
    missing = []
    for page in ALL_PAGES:
        for path, test in CITED_TEST.findall(page.read_text()):
            source = ROOT / path
            if not source.is_file():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
            elif test and not re.search(rf"^(?:(?:async )?def {test[2:]}\b|{test[2:]} *=)", source.read_text(), re.M):
                missing.append(f"{page.relative_to(ROOT)}: {path}{test}")
    assert not missing, "cited tests that do not exist:\n" + "\n".join(missing)


def test_every_make_target_the_docs_name_exists():
    """``make demo``, ``make bench``, ... named in a page are targets of the Makefile."""
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*)\s*:", makefile, re.M))
    assert {"demo", "test", "bench"} <= targets
    def named(text: str) -> list[str]:
        return MAKE.findall(text) + [n for block in SHELL.findall(text) for n in MAKE_LINE.findall(block)]

    missing = sorted({f"{page.relative_to(ROOT)}: make {name}" for page in ALL_PAGES
                      for name in named(page.read_text()) if name not in targets})
    assert not missing, "make targets that do not exist:\n" + "\n".join(missing)


def test_the_readme_is_a_front_page():
    """At most ~200 lines, with the two commands, a quick start that runs and the map of the docs."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    assert "make demo" in text and "make test" in text and "docs/index.md" in text
    assert len(BLOCK.findall(text)) >= 2, "a sync and an async quick start"


#: ``mysql-state <command> [words and --options]`` in a shell block, up to a shell separator
#: or a comment.
CLI_CALL = re.compile(r"mysql-state ((?:[^\s;|&#<>]+[ \t]*)+)")
SHELL = re.compile(r"^```(?:sh|bash|shell)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def cli_calls() -> dict[str, set[str]]:
    """Every ``mysql-state`` command the shell blocks show, with the options they give it."""
    calls: dict[str, set[str]] = {}
    for page in ALL_PAGES:
        for block in SHELL.findall(page.read_text()):
            for line in block.splitlines():
                for call in CLI_CALL.findall(line.split(" #", 1)[0]):
                    words = call.split()
                    while words[:1] and words[0] in ("--url", "--database", "--table"):
                        words = words[2:]  # a global option and its value, before the command
                    command = next((w for w in words if not w.startswith("-")), None)
                    if command is not None:
                        calls.setdefault(command, set()).update(
                            w.split("=", 1)[0] for w in words if w.startswith("--"))
    return calls


def cli_help(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mysql_state", *args, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "MYSQL_URL"})
    assert done.returncode == 0, f"mysql-state {' '.join(args)} --help: {done.stderr}"
    return done.stdout


def test_every_cli_command_the_docs_show_exists_with_its_options():
    """A ``mysql-state`` command in a shell block is a command (or an alias) of the CLI, and
    each ``--option`` it is shown with is one that command (or the CLI itself) takes."""
    calls = cli_calls()
    assert {"sessions", "get", "delete", "prune"} <= set(calls), sorted(calls)
    common = set(re.findall(r"--[a-z][a-z-]*", cli_help()))
    wrong = []
    for command, options in sorted(calls.items()):
        known = common | set(re.findall(r"--[a-z][a-z-]*", cli_help(command)))
        wrong += [f"mysql-state {command} {option}" for option in sorted(options - known)]
    assert not wrong, "options the CLI does not take:\n" + "\n".join(wrong)


def test_every_public_name_of_the_store_is_in_the_api_page():
    """docs/api.md names every public method and attribute of the sync store, and every public
    name the package exports (a method added later cannot stay undocumented)."""
    import mysql_state
    from mysql_state import MysqlAgentStateStore

    text = (ROOT / "docs" / "api.md").read_text() + (ROOT / "docs" / "operating.md").read_text()
    code = " ".join(re.findall(r"```.*?```|`[^`\n]+`", text, re.S))  # code spans and blocks only
    names = {n for n in dir(MysqlAgentStateStore) if not n.startswith("_")} | set(mysql_state.__all__)
    missing = sorted(n for n in names if not re.search(rf"(?<![\w.]){re.escape(n)}\b", code))
    assert not missing, f"not in docs/api.md (or operating.md): {missing}"


def test_every_cli_command_is_in_the_cli_page():
    """docs/cli.md has a row for every command ``mysql-state --help`` lists, and its aliases."""
    commands = []
    for name, aliases in re.findall(r"^    ([a-z][a-z-]*)(?: \(([a-z, -]+)\))?", cli_help(), re.M):
        commands += [name, *(a.strip() for a in aliases.split(",") if a.strip())]
    assert {"sessions", "get", "show", "delete", "rm"} <= set(commands), commands
    page = (ROOT / "docs" / "cli.md").read_text()
    missing = [c for c in commands if not re.search(rf"`{re.escape(c)}\b", page)]
    assert not missing, f"commands not in docs/cli.md: {missing}"


def test_the_cli_pages_examples_run_in_order(url: str, database: str, tmp_path: Path):
    """docs/cli.md's "Examples" block, line by line in one shell, on a database of its own: each
    exits 0 and prints what its comment says. Left out: `server start` (the URL is given) and
    `reencrypt` (its keys are placeholders; tests/test_cli.py runs it with real ones)."""
    page = (ROOT / "docs" / "cli.md").read_text()
    block = re.search(r"## Examples\n+```sh\n(.*?)```", page, re.S).group(1)
    lines = [x for x in block.splitlines() if x.strip() and "server start" not in x and "MYSQL_STATE_KEYS" not in x]
    assert len(lines) >= 15, lines
    env = dict(os.environ, MYSQL_URL=url.rstrip("/") + "/" + database,
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    subprocess.run([sys.executable, "-m", "mysql_state", "--create", "sessions"], env=env, check=True,
                   capture_output=True, cwd=tmp_path)
    outputs = []
    for line in lines:
        done = subprocess.run(["bash", "-c", line.split("  #")[0]], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        outputs.append(done.stdout)
    by = dict(zip(lines, outputs))
    assert next(v for k, v in by.items() if k.startswith("mysql-state append-list")).strip() == "4"
    assert next(v for k, v in by.items() if "--tail 2" in k).splitlines() == ['{"t":3}', '{"t":4}']
    assert next(v for k, v in by.items() if k.startswith("mysql-state exists")).strip() == "yes"
