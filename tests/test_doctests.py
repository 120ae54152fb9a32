"""Every docstring example of the package runs (doctest), against the test server.

Each module's examples run in one namespace holding ``url`` (a fresh database of the test
server), ``store`` (a :class:`MysqlAgentStateStore` on it), ``astore`` (the async twin of that
store), ``messages`` (a short conversation) and ``asyncio``; the environment holds
``MYSQL_URL`` (the test server) and ``MYSQL_STATE_KEYS`` (a two-key ring, ``k2`` current).
The AgentScope 2.x module's examples also get ``model`` (an offline scripted chat model that
answers "hello") and ``app_url`` (the same database for AgentScope's own app tables).
Names a module makes on first use (``__getattr__``, listed in ``__all__``) are searched too.
The framework adapters' examples run inside their framework's virtualenv, as cases of that
framework's suite (``tests/*_inner``)."""

from __future__ import annotations

import asyncio
import base64
import doctest
import importlib
import os
import pkgutil

import pytest

import mysql_state
from mysql_state import MysqlAgentStateStore

#: Modules whose examples need a framework that the main environment does not hold.
IN_THEIR_VIRTUALENV = {"mysql_state.adk", "mysql_state.agentscope1", "mysql_state.openai_agents"}
MODULES = ["mysql_state"] + sorted(m.name for m in pkgutil.walk_packages(mysql_state.__path__, "mysql_state.")
                                   if m.name not in IN_THEIR_VIRTUALENV and not m.name.endswith("__main__"))


def namespace(url: str) -> dict:
    """What every example may use (see the module docstring)."""
    from mysql_state.aio import AsyncMysqlAgentStateStore

    store = MysqlAgentStateStore.from_url(url, create_if_not_exist=True)
    messages = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
    return {"url": url, "store": store, "astore": AsyncMysqlAgentStateStore(store, close_store=False),
            "messages": messages, "asyncio": asyncio, "MysqlAgentStateStore": MysqlAgentStateStore}


def agentscope_extras(url: str) -> dict:
    """``model`` and ``app_url`` for the AgentScope 2.x examples."""
    from agentscope.credential import CredentialBase
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import TextBlock
    from agentscope.model import ChatModelBase, ChatResponse, ChatUsage

    class Hello(ChatModelBase):
        """An offline chat model: every call answers "hello"."""

        def __init__(self) -> None:
            super().__init__(credential=CredentialBase(), model="scripted", parameters=ChatModelBase.Parameters(),
                             stream=False, max_retries=0, context_size=32768)
            self.formatter = OpenAIChatFormatter()

        async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kwargs) -> ChatResponse:
            return ChatResponse(content=[TextBlock(text="hello")], is_last=True,
                                usage=ChatUsage(input_tokens=3, output_tokens=1, time=0.0))

    return {"model": Hello(), "app_url": "mysql+aiomysql://" + url.split("://", 1)[1]}


EXTRAS = {"mysql_state.agentscope": agentscope_extras}


def lazy_names(module) -> list:
    """The objects of ``__all__`` the module makes on first use (absent from its namespace)."""
    return [(n, getattr(module, n)) for n in getattr(module, "__all__", ()) if n not in vars(module)]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, url: str, database: str, tmp_path, monkeypatch) -> None:
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)  # examples that write a file write it here
    monkeypatch.setenv("MYSQL_URL", url)
    keys = {kid: base64.b64encode(os.urandom(32)).decode() for kid in ("k2", "k1")}
    monkeypatch.setenv("MYSQL_STATE_KEYS", ",".join(f"{k}={v}" for k, v in keys.items()))
    db_url = url.rstrip("/") + "/" + database
    globs = namespace(db_url)
    if name in EXTRAS:
        globs.update(EXTRAS[name](db_url))
    try:
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        tests = finder.find(module, name, globs={**vars(module), **globs})
        for attr, obj in lazy_names(module):
            tests += finder.find(obj, f"{name}.{attr}", module=module, globs={**vars(module), **globs})
        for test in tests:
            runner.run(test)
        result = runner.summarize(verbose=False)
    finally:
        globs["store"].close()
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (see above)"
