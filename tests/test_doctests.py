"""Every docstring example of the package runs (doctest), against the test server.

Each module's examples run in one namespace holding ``url`` (a fresh database of the test
server), ``store`` (a :class:`MysqlAgentStateStore` on it), ``astore`` (the async twin of that
store), ``messages`` (a short conversation) and ``asyncio``. The framework adapters' examples run
inside their framework's virtualenv, as cases of that framework's suite (``tests/*_inner``)."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import pkgutil

import pytest

import mysql_state
from mysql_state import MysqlAgentStateStore

#: Modules whose examples need a framework that the main environment does not hold.
IN_THEIR_VIRTUALENV = {"mysql_state.adk", "mysql_state.agentscope1", "mysql_state.openai_agents"}
MODULES = sorted(m.name for m in pkgutil.walk_packages(mysql_state.__path__, "mysql_state.")
                 if m.name not in IN_THEIR_VIRTUALENV and not m.name.endswith("__main__"))


def namespace(url: str) -> dict:
    """What every example may use (see the module docstring)."""
    from mysql_state.aio import AsyncMysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, create_if_not_exist=True)
    messages = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
    return {"url": url, "store": store, "astore": AsyncMysqlAgentStateStore(store, close_store=False),
            "messages": messages, "asyncio": asyncio, "MysqlAgentStateStore": MysqlAgentStateStore}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, url: str, database: str, tmp_path, monkeypatch) -> None:
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)  # examples that write a file write it here
    globs = namespace(url.rstrip("/") + "/" + database)
    try:
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        for test in finder.find(module, name, globs={**vars(module), **globs}):
            runner.run(test)
        result = runner.summarize(verbose=False)
    finally:
        globs["store"].close()
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (see above)"
