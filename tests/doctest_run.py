"""Run one module's docstring examples against the test server (doctest), the one way every
suite does it: tests/test_doctests.py in the main environment, and a case of each framework's
suite (``tests/*_inner``) for the adapter whose framework only its virtualenv holds.

The namespace: ``url`` (a fresh database of the test server), ``store`` (a
:class:`MysqlAgentStateStore` on it), ``astore`` (its async twin), ``messages`` (a short
conversation), ``asyncio``, plus the caller's ``extras``. The environment: ``MYSQL_URL`` (the
test server) and ``MYSQL_STATE_KEYS`` (a two-key ring, ``k2`` current). Names a module makes on
first use (``__getattr__``, listed in ``__all__``) are searched too."""

from __future__ import annotations

import asyncio
import base64
import doctest
import importlib
import os
from typing import Any, Callable, Optional

from mysql_state import MysqlAgentStateStore


def namespace(url: str) -> dict:
    """What every example may use (see the module docstring)."""
    from mysql_state.aio import AsyncMysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, create_if_not_exist=True)
    messages = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
    return {"url": url, "store": store, "astore": AsyncMysqlAgentStateStore(store, close_store=False),
            "messages": messages, "asyncio": asyncio, "MysqlAgentStateStore": MysqlAgentStateStore}


def lazy_names(module: Any) -> list:
    """The objects of ``__all__`` the module makes on first use (absent from its namespace)."""
    return [(n, getattr(module, n)) for n in getattr(module, "__all__", ()) if n not in vars(module)]


def run_examples(name: str, server_url: str, database: str, monkeypatch: Any,
                 extras: Optional[Callable[[str], dict]] = None) -> doctest.TestResults:
    """Every docstring example of module ``name``, on a fresh ``database`` of ``server_url``;
    the failures are printed (doctest's report), the counts returned."""
    module = importlib.import_module(name)
    monkeypatch.setenv("MYSQL_URL", server_url)
    ring = {kid: base64.b64encode(os.urandom(32)).decode() for kid in ("k2", "k1")}
    monkeypatch.setenv("MYSQL_STATE_KEYS", ",".join(f"{k}={v}" for k, v in ring.items()))
    db_url = server_url.rstrip("/") + "/" + database
    globs = namespace(db_url)
    try:
        if extras is not None:
            globs.update(extras(db_url))
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        tests = finder.find(module, name, globs={**vars(module), **globs})
        for attr, obj in lazy_names(module):
            tests += finder.find(obj, f"{name}.{attr}", module=module, globs={**vars(module), **globs})
        for test in tests:
            runner.run(test)
        return runner.summarize(verbose=False)
    finally:
        globs["store"].close()
