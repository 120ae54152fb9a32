"""LangGraph's own conformance suite (langgraph-checkpoint-conformance, a dependency, not a
copy) against MysqlSaver on the real server: all five base capabilities and the three
extended ones must be detected and pass, every test of each."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="needs the langgraph extra (make test installs it)")

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES  # noqa: E402
from langgraph.checkpoint.conformance.report import ProgressCallbacks  # noqa: E402

from mysql_state import MysqlAgentStateStore  # noqa: E402
from mysql_state.aio import AsyncMysqlAgentStateStore  # noqa: E402
from mysql_state.langgraph import MysqlSaver  # noqa: E402


def _run_suite(make_saver, report) -> None:
    made = []

    @checkpointer_test(name="MysqlSaver")
    async def factory():
        saver = make_saver()
        made.append(saver)
        yield saver
        await asyncio.to_thread(saver.close)

    failures: list[str] = []

    def on_result(capability: str, test: str, passed: bool, error) -> None:
        if not passed:
            failures.append(f"{capability}/{test}:\n{error}")

    result = asyncio.run(validate(factory, progress=ProgressCallbacks(on_test_result=on_result)))
    assert not failures, "\n\n".join(failures)
    assert {c.value for c in ALL_CAPABILITIES} == set(result.results)
    for name, r in result.results.items():
        assert r.detected, f"capability {name} not detected"
        assert r.passed is True and r.tests_failed == 0 and r.tests_passed > 0, (name, r)
    assert result.conformance_level() == "FULL"
    total = sum(r.tests_passed for r in result.results.values())
    report(f"LangGraph conformance suite: FULL, {total} tests in {len(result.results)} capabilities, "
           f"{len(made)} savers")


def test_conformance_suite_passes_whole(url, database, report):
    _run_suite(lambda: MysqlSaver.from_url(url, database_name=database, create_if_not_exist=True), report)


def test_conformance_suite_passes_whole_on_the_async_store_with_a_user(url, database, report):
    sync = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
    astore = AsyncMysqlAgentStateStore(sync, close_store=False)
    try:
        _run_suite(lambda: MysqlSaver(astore, user_id="alice"), report)
        assert sync.list_session_ids("alice") and not sync.list_session_ids(None)
    finally:
        asyncio.run(astore.aclose())
        sync.close()
