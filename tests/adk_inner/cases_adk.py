"""Google ADK cases, run by tests/test_adk.py inside .venv-adk. Not named test_*: the default
run never imports it.

The behaviours of ADK's shared session-service contract (tests/unittests/sessions/
test_session_service.py, the tests taking the ``session_service`` fixture) and of
DatabaseSessionService's stale-writer rules, written against a real server; plus this
adapter's own promises: encoded ids, bounded writes per event, concurrent appends."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.session import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from mysql_state import MysqlAgentStateStore
from tests.rows_read import rows_read  # noqa: F401 - a fixture
from mysql_state.adk import MysqlSessionService, decode_id, encode_id

ROOT = Path(__file__).resolve().parents[2]
APP, USER = "my_app", "user"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def svc(store: MysqlAgentStateStore) -> MysqlSessionService:
    return MysqlSessionService(store)


def delta_event(delta: dict, **kw) -> Event:
    return Event(invocation_id=kw.pop("invocation_id", "inv"), author="user", actions=EventActions(state_delta=delta), **kw)


def test_is_a_base_session_service_with_every_method(svc) -> None:
    assert isinstance(svc, BaseSessionService) and not MysqlSessionService.__abstractmethods__
    assert run(svc.get_session(app_name=APP, user_id=USER, session_id="123")) is None


@pytest.mark.parametrize("blocked, says", [
    ("google.adk", "needs Google ADK: pip install"),
    ("google.adk.sessions._session_util", "cannot use the installed Google ADK (import of google.adk.sessions."),
])
def test_an_import_that_fails_says_whether_adk_is_missing_or_not_the_one_it_was_written_for(blocked, says) -> None:
    """Every ImportError said "pip install" even with ADK installed, the real cause only in the
    chain (found by an adapter audit)."""
    import subprocess

    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "try:\n    import mysql_state.adk\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert says in out.stdout, out.stdout + out.stderr


def test_create_get_delete_and_get_equals_create(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, state={"key": "value"})
        assert s.id and s.state == {"key": "value"} and s.last_update_time <= time.time()
        assert await svc.get_session(app_name=APP, user_id=USER, session_id=s.id) == s
        await svc.delete_session(app_name=APP, user_id=USER, session_id=s.id)
        assert await svc.get_session(app_name=APP, user_id=USER, session_id=s.id) is None
        await svc.delete_session(app_name=APP, user_id=USER, session_id=s.id)  # absent: fine
    run(go())


def test_list_sessions_of_a_user_and_of_all_users_with_merged_state(svc) -> None:
    async def go():
        for uid, sid in (("u1", "s1a"), ("u1", "s1b"), ("u2", "s2a")):
            await svc.create_session(app_name=APP, user_id=uid, session_id=sid,
                                     state={"key": sid, "user:who": uid, "app:a": 1})
        one = (await svc.list_sessions(app_name=APP, user_id="u1")).sessions
        assert {s.id: s.state["key"] for s in one} == {"s1a": "s1a", "s1b": "s1b"}
        every = (await svc.list_sessions(app_name=APP)).sessions
        assert {(s.user_id, s.id) for s in every} == {("u1", "s1a"), ("u1", "s1b"), ("u2", "s2a")}
        assert all(s.state["user:who"] == s.user_id and s.state["app:a"] == 1 and s.events == [] for s in every)
        assert (await svc.list_sessions(app_name="other")).sessions == []
    run(go())


def test_list_sessions_ordered_by_last_update_time(svc) -> None:
    async def go():
        for sid in "abc":
            await svc.create_session(app_name=APP, user_id=USER, session_id=sid)
        a = await svc.get_session(app_name=APP, user_id=USER, session_id="a")
        await asyncio.sleep(0.01)
        await svc.append_event(a, Event(invocation_id="i", author="user"))
        assert [s.id for s in (await svc.list_sessions(app_name=APP, user_id=USER)).sessions] == ["b", "c", "a"]
    run(go())


def test_app_user_and_session_state_scopes(svc) -> None:
    async def go():
        s1 = await svc.create_session(app_name=APP, user_id="u1", session_id="s1",
                                      state={"app:k1": "v1", "user:k1": "v1", "sk1": "v1", "temp:t": "x"})
        assert "temp:t" not in s1.state
        await svc.append_event(s1, delta_event({"app:k2": "v2", "user:k2": "v2", "sk2": "v2"}))
        s1b = await svc.create_session(app_name=APP, user_id="u1", session_id="s1b")
        assert s1b.state == {"app:k1": "v1", "app:k2": "v2", "user:k1": "v1", "user:k2": "v2"}
        s2 = await svc.create_session(app_name=APP, user_id="u2", session_id="s2")
        assert s2.state == {"app:k1": "v1", "app:k2": "v2"}
        got = await svc.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert got.state["sk1"] == "v1" and got.state["sk2"] == "v2"
        assert await svc.get_user_state(app_name=APP, user_id="u1") == {"k1": "v1", "k2": "v2"}
        assert await svc.get_user_state(app_name=APP, user_id="u2") == {}
        assert await svc.get_user_state(app_name="other", user_id="u1") == {}
    run(go())


def test_deltas_replace_values_store_none_and_keep_booleans(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id="u1", session_id="s1",
                                     state={"profile": {"name": "ada", "role": "admin"}, "flag": False,
                                            "app:cfg": {"a": 1, "b": 2}, "user:pref": "dark"})
        await svc.append_event(s, delta_event({"profile": {"name": "bob"}, "new": True, "app:cfg": {"a": 9},
                                               "user:pref": None}))
        got = await svc.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert got.state["profile"] == {"name": "bob"} and got.state["flag"] is False and got.state["new"] is True
        assert got.state["app:cfg"] == {"a": 9} and "user:pref" in got.state and got.state["user:pref"] is None
        assert got == s
    run(go())


def test_temp_state_reaches_only_the_in_memory_session(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        e = delta_event({"temp:k1": "v1", "sk": "v2"})
        await svc.append_event(s, e)
        assert s.state["temp:k1"] == "v1" and "temp:k1" not in e.actions.state_delta
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert "temp:k1" not in got.state and "temp:k1" not in got.events[0].actions.state_delta
        assert got.state["sk"] == "v2"
    run(go())


def test_same_session_id_of_two_users_and_duplicates(svc) -> None:
    async def go():
        s1 = await svc.create_session(app_name=APP, user_id="u1", session_id="s1", state={"keep": "original"})
        await svc.append_event(s1, Event(invocation_id="i", author="user"))
        await svc.create_session(app_name=APP, user_id="u2", session_id="s1")
        got = await svc.get_session(app_name=APP, user_id="u2", session_id="s1")
        assert got.user_id == "u2" and got.events == []
        for padded in ("s1", "  s1  "):
            with pytest.raises(AlreadyExistsError):
                await svc.create_session(app_name=APP, user_id="u1", session_id=padded, state={"keep": "clobbered"})
        assert (await svc.get_session(app_name=APP, user_id="u1", session_id="s1")).state["keep"] == "original"
    run(go())


def test_concurrent_creation_of_one_id_has_one_winner(store) -> None:
    results: list = []

    def create() -> None:
        async def go():
            try:
                results.append(await MysqlSessionService(store).create_session(
                    app_name=APP, user_id=USER, session_id="race", state={"by": threading.get_ident()}))
            except AlreadyExistsError as exc:
                results.append(exc)
        asyncio.run(go())

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1 and len(results) == 4
    got = run(MysqlSessionService(store).get_session(app_name=APP, user_id=USER, session_id="race"))
    assert got.state == winners[0].state


def test_padded_and_blank_session_ids(svc) -> None:
    async def go():
        created = await svc.create_session(app_name=APP, user_id=USER, session_id="order-42\n", state={"cart": "book"})
        assert created.id == "order-42"
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="order-42\n")
        assert got.id == "order-42" and got.state["cart"] == "book"
        await svc.delete_session(app_name=APP, user_id=USER, session_id="order-42\n")
        assert await svc.get_session(app_name=APP, user_id=USER, session_id="order-42") is None
        assert (await svc.create_session(app_name=APP, user_id=USER, session_id="   ")).id.strip()
    run(go())


def test_events_round_trip_bytes_and_every_field(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        content = types.Content(role="user", parts=[types.Part.from_bytes(data=b"img", mime_type="image/png")])
        grounding = types.GroundingMetadata(search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob"))
        await svc.append_event(s, Event(invocation_id="a", author="user", content=content, grounding_metadata=grounding))
        full = Event(
            invocation_id="b", author="user", turn_complete=True, partial=False,
            content=types.Content(role="user", parts=[types.Part(text="t")]),
            actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True,
                                 requested_tool_confirmations={"c1": ToolConfirmation(hint="h", payload={"r": 1})}),
            long_running_tool_ids={"tool1"}, error_code="e", error_message="m", interrupted=True,
            usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=1, total_token_count=2),
            citation_metadata=types.CitationMetadata(), custom_metadata={"k": "v"}, timestamp=1700000000.123,
            input_transcription=types.Transcription(text="in", finished=True),
        )
        await svc.append_event(s, full)
        got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
        assert got == s and got.events[0].content == content and got.events[0].grounding_metadata == grounding
        assert got.events[1].actions.requested_tool_confirmations["c1"].payload == {"r": 1}
    run(go())


def test_non_json_state_is_made_json_safe_as_adk_does(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        await svc.append_event(s, delta_event({"callback": lambda: 1, "ok": 2}))
        got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
        assert got.state["ok"] == 2 and isinstance(got.state["callback"], str) and len(got.events) == 1
    run(go())


def test_last_update_time_follows_the_event_and_partial_events_are_not_stored(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        t0 = s.last_update_time
        await svc.append_event(s, Event(invocation_id="i", author="user", partial=True))
        await svc.append_event(s, Event(invocation_id="i", author="user", timestamp=t0 + 10))
        assert s.last_update_time == pytest.approx(t0 + 10, abs=1e-6)
        got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
        assert got.last_update_time == pytest.approx(t0 + 10, abs=1e-6) and len(got.events) == 1
    run(go())


def test_get_session_config_recent_events_and_after_timestamp(svc) -> None:
    async def go():
        base = int(time.time())
        s = await svc.create_session(app_name=APP, user_id=USER)
        for i in range(1, 6):
            await svc.append_event(s, Event(author="user", timestamp=base + i))

        async def ts(**cfg):
            got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id, config=GetSessionConfig(**cfg))
            return [e.timestamp - base for e in got.events]

        assert await ts() == [1, 2, 3, 4, 5]
        assert await ts(num_recent_events=0) == []
        assert await ts(num_recent_events=3) == [3, 4, 5]
        assert await ts(after_timestamp=base + 4) == [4, 5]
        assert await ts(after_timestamp=base + 50) == []
        assert await ts(after_timestamp=base + 4, num_recent_events=3) == [4, 5]
    run(go())


def test_after_timestamp_reads_back_past_one_window(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        for i in range(40):
            await svc.append_event(s, Event(author="user", timestamp=1000.0 + i))
        got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id,
                                    config=GetSessionConfig(after_timestamp=1005.0))
        assert [e.timestamp for e in got.events] == [1000.0 + i for i in range(5, 40)]
    run(go())


def test_exact_epochs_and_append_order_are_kept(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        for eid, t in (("z", 1730615400.0), ("a", 1730613600.0), ("m", 1730613600.0)):
            await svc.append_event(s, Event(author="user", id=eid, timestamp=t))
        got = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
        assert [(e.id, e.timestamp) for e in got.events] == [("z", 1730615400.0), ("a", 1730613600.0), ("m", 1730613600.0)]
    run(go())


def test_append_to_a_deleted_session_is_session_not_found(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        await svc.delete_session(app_name=APP, user_id=USER, session_id=s.id)
        with pytest.raises(SessionNotFoundError):
            await svc.append_event(s, Event(invocation_id="i", author="user"))
    run(go())


def test_a_stale_session_is_refused_and_storage_keeps_the_committed_events(svc) -> None:
    async def go():
        now = time.time()
        original = await svc.create_session(app_name=APP, user_id=USER)
        await svc.append_event(original, delta_event({"sk1": "v1"}, invocation_id="inv1", timestamp=now + 1))
        updated = await svc.get_session(app_name=APP, user_id=USER, session_id=original.id)
        await svc.append_event(updated, delta_event({"sk2": "v2"}, invocation_id="inv2", timestamp=now + 2))
        with pytest.raises(StaleSessionError, match="modified in storage"):
            await svc.append_event(original, delta_event({"sk3": "v3"}, invocation_id="inv3", timestamp=now + 3))
        final = await svc.get_session(app_name=APP, user_id=USER, session_id=original.id)
        assert [e.invocation_id for e in final.events] == ["inv1", "inv2"] and "sk3" not in final.state
    run(go())


def test_concurrent_copies_of_one_revision_have_one_winner(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER)
        for i in range(4):
            latest = await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)
            a, b = latest.model_copy(deep=True), latest.model_copy(deep=True)
            results = await asyncio.gather(svc.append_event(a, delta_event({f"k{i}a": 1})),
                                           svc.append_event(b, delta_event({f"k{i}b": 1})), return_exceptions=True)
            assert sorted(type(r).__name__ for r in results) == ["Event", "StaleSessionError"]
        assert len((await svc.get_session(app_name=APP, user_id=USER, session_id=s.id)).events) == 4
    run(go())


def test_timestamp_drift_and_markerless_current_sessions_are_accepted(svc) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s1")
        await svc.append_event(s, Event(invocation_id="inv1", author="user", timestamp=s.last_update_time + 10))
        s.last_update_time -= 0.0001
        await svc.append_event(s, Event(invocation_id="inv2", author="user", timestamp=s.last_update_time + 10))
        s._storage_update_marker = None
        s.last_update_time -= 0.0001
        await svc.append_event(s, Event(invocation_id="inv3", author="user", timestamp=s.last_update_time + 10))
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert [e.invocation_id for e in got.events] == ["inv1", "inv2", "inv3"]
        stale = got.model_copy(deep=True)
        stale._storage_update_marker = None
        stale.events = stale.events[:1]
        stale.last_update_time = 0.0
        with pytest.raises(StaleSessionError):
            await svc.append_event(stale, Event(invocation_id="inv4", author="user"))
    run(go())


# ---- this adapter's own promises -----------------------------------------------------------------


def test_ids_with_colons_and_percents_never_collide(svc) -> None:
    for raw_id in ("a%3A:b%25", "_hash", "__x_", "%5F", ""):
        assert decode_id(encode_id(raw_id)) == raw_id and ":" not in encode_id(raw_id)
        assert not encode_id(raw_id).startswith("_")  # so no key ends in the reserved ':_hash'

    async def go():
        triples = [("a:b", "c", "d"), ("a", "b:c", "d"), ("a", "b", "c:d"), ("a%3Ab", "c", "d"), ("a", "b%3Ac", "d"),
                   ("a", "", "d"), ("", "a", "d"), ("_hash", "_hash", "_hash"), ("a", "%5Fx", "_x")]
        for app, user, sid in triples:
            await svc.create_session(app_name=app, user_id=user, session_id=sid, state={"who": [app, user, sid],
                                                                                       "user:u": user, "app:a": app})
        for app, user, sid in triples:
            got = await svc.get_session(app_name=app, user_id=user, session_id=sid)
            assert got.state["who"] == [app, user, sid] and (got.app_name, got.user_id, got.id) == (app, user, sid)
            assert got.state["user:u"] == user and got.state["app:a"] == app
            listed = (await svc.list_sessions(app_name=app, user_id=user)).sessions
            assert [(s.user_id, s.id) for s in listed] == [(user, sid)]
        assert {(s.user_id, s.id) for s in (await svc.list_sessions(app_name="a")).sessions} == {
            ("b:c", "d"), ("b", "c:d"), ("b%3Ac", "d"), ("", "d"), ("%5Fx", "_x")}
    run(go())


def test_ids_too_long_for_the_columns_are_a_value_error_naming_them(svc) -> None:
    with pytest.raises(ValueError, match="session_id 'x{60}"):
        run(svc.create_session(app_name=APP, user_id=USER, session_id="x" * 250))
    with pytest.raises(ValueError, match="app_name"):
        run(svc.get_session(app_name=":" * 90, user_id=USER, session_id="s"))


def test_one_event_writes_a_bounded_number_of_rows(svc, raw) -> None:
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="long")
        for i in range(300):
            await svc.append_event(s, delta_event({"user:k": i} if i == 0 else {}, timestamp=1000.0 + i))
        before = {r[:3]: r[3] for r in raw.rows()}
        await svc.append_event(s, delta_event({"sk": 1, "user:k": 2}, timestamp=2000.0))
        after = {r[:3]: r[3] for r in raw.rows()}
        changed = [k for k in after if before.get(k) != after[k]]
        # the event, the list's hash row, the session's row, the user's row (already created)
        assert len(changed) == 4, changed
        got = await svc.get_session(app_name=APP, user_id=USER, session_id="long",
                                    config=GetSessionConfig(num_recent_events=2))
        assert [e.timestamp for e in got.events] == [1299.0, 2000.0]
        listed = (await svc.list_sessions(app_name=APP, user_id=USER)).sessions
        assert [(s.id, s.events) for s in listed] == [("long", [])]
    run(go())


def test_concurrent_appends_to_one_session_and_to_a_users_sessions_lose_nothing(store) -> None:
    run(MysqlSessionService(store).create_session(app_name=APP, user_id=USER, session_id="shared"))
    run(MysqlSessionService(store).create_session(app_name=APP, user_id=USER, session_id="other"))

    def writer(n: int) -> None:
        async def go():
            svc = MysqlSessionService(store)
            for i in range(8):
                sid = "shared" if i % 2 else "other"
                while True:  # a stale copy is reloaded, as a caller would
                    s = await svc.get_session(app_name=APP, user_id=USER, session_id=sid,
                                              config=GetSessionConfig(num_recent_events=1))
                    try:
                        await svc.append_event(s, delta_event({f"user:w{n}-{i}": i, f"s{n}-{i}": i}))
                        break
                    except StaleSessionError:
                        continue
        asyncio.run(go())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    svc = MysqlSessionService(store)
    shared = run(svc.get_session(app_name=APP, user_id=USER, session_id="shared"))
    other = run(svc.get_session(app_name=APP, user_id=USER, session_id="other"))
    assert len(shared.events) == 12 and len(other.events) == 12
    assert run(svc.get_user_state(app_name=APP, user_id=USER)) == {f"w{n}-{i}": i for n in range(3) for i in range(8)}


def test_get_session_sees_the_state_and_events_of_one_append_while_another_appends(url, database, store) -> None:
    """The session's row and its events were read by two statements: an append landing in between
    gave events whose state deltas were missing from session.state (DatabaseSessionService reads
    both in one transaction); an append on that copy was then refused as stale."""
    writer_store = MysqlAgentStateStore.from_url(url, database_name=database)
    writer, reader = MysqlSessionService(writer_store), MysqlSessionService(store)
    session = run(writer.create_session(app_name=APP, user_id=USER, session_id="busy", state={"n": 0}))
    stop = threading.Event()
    appended = []

    def append() -> None:
        async def go():
            i = 0
            while not stop.is_set():
                i += 1
                await writer.append_event(session, delta_event({"n": i}))
            appended.append(i)
        asyncio.run(go())

    thread = threading.Thread(target=append)
    thread.start()
    try:
        for k in range(150):
            config = GetSessionConfig(num_recent_events=3) if k % 3 == 1 else None
            got = run(reader.get_session(app_name=APP, user_id=USER, session_id="busy", config=config))
            last = got.events[-1].actions.state_delta["n"] if got.events else 0
            assert got.state["n"] == last, (got.state["n"], last)
            if config is None:
                assert len(got.events) == last
    finally:
        stop.set()
        thread.join()
        writer_store.close()
    assert appended and appended[0] > 10


def test_get_session_under_the_lock_reads_the_same_session(svc, monkeypatch) -> None:
    """The way get_session takes when appends keep coming in between its two reads (here at
    once: no optimistic read): the same session, state and events."""
    import mysql_state.adk as adk

    run(svc.create_session(app_name=APP, user_id=USER, session_id="locked", state={"app:a": 1, "user:u": 2, "s": 3}))
    s = run(svc.get_session(app_name=APP, user_id=USER, session_id="locked"))
    for i in range(5):
        run(svc.append_event(s, delta_event({"n": i}, timestamp=1000.0 + i)))
    configs = [None, GetSessionConfig(num_recent_events=2), GetSessionConfig(num_recent_events=0),
               GetSessionConfig(after_timestamp=1003.0)]
    optimistic = [run(svc.get_session(app_name=APP, user_id=USER, session_id="locked", config=c)) for c in configs]
    monkeypatch.setattr(adk, "READ_ATTEMPTS", 0)
    locked = [run(svc.get_session(app_name=APP, user_id=USER, session_id="locked", config=c)) for c in configs]
    assert [x.model_dump() for x in locked] == [x.model_dump() for x in optimistic]
    assert [len(x.events) for x in locked] == [5, 2, 0, 2] and locked[0].state["app:a"] == 1
    assert run(svc.get_session(app_name=APP, user_id=USER, session_id="nope")) is None


def test_concurrent_first_writes_of_shared_state_lose_no_key(store) -> None:
    """Many sessions of one user created at once, each writing new app: and user: keys: the rows'
    first writes race (a plain INSERT each, the loser re-run), and every key survives."""
    errors: list = []
    barrier = threading.Barrier(6)

    def create(n: int) -> None:
        async def go():
            svc = MysqlSessionService(store)
            barrier.wait()
            s = await svc.create_session(app_name="race", user_id=USER, session_id=f"c{n}",
                                         state={f"app:c{n}": n, f"user:c{n}": n})
            barrier.wait()
            await svc.append_event(s, delta_event({f"app:e{n}": n, f"user:e{n}": n}))
        try:
            asyncio.run(go())
        except Exception as exc:  # re-raised below: an assertion in a thread is lost otherwise
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    svc = MysqlSessionService(store)
    want = {f"{p}{n}": n for p in "ce" for n in range(6)}
    assert run(svc.get_user_state(app_name="race", user_id=USER)) == want
    got = run(svc.get_session(app_name="race", user_id=USER, session_id="c0"))
    assert {k[4:]: v for k, v in got.state.items() if k.startswith("app:")} == want


def test_reads_cost_what_they_return_not_the_sessions_length(svc, rows_read) -> None:
    """get_session(num_recent_events=k) reads about k events; list_sessions reads the listed
    sessions' rows, never their events (500 events on one session change nothing)."""
    async def fill(sid: str, events: int, user: str = USER) -> None:
        s = await svc.create_session(app_name=APP, user_id=user, session_id=sid, state={"user:u": user})
        for i in range(events):
            await svc.append_event(s, delta_event({}, timestamp=1000.0 + i))

    run(fill("long", 500))
    for n in range(3):
        run(fill(f"short{n}", 2))
    run(fill("theirs", 50, user="other"))
    cfg = GetSessionConfig(num_recent_events=5)
    recent = rows_read.of(svc.get_session(app_name=APP, user_id=USER, session_id="long", config=cfg))
    assert recent <= 5 + 10, recent  # the 5 events, the list's hash row, the app, user and session rows
    whole = rows_read.of(svc.get_session(app_name=APP, user_id=USER, session_id="long"))
    assert 500 <= whole <= 500 + 10, whole
    mine = rows_read.of(svc.list_sessions(app_name=APP, user_id=USER))
    assert mine <= 4 + 4, mine  # 4 session rows, the app and user rows
    every = rows_read.of(svc.list_sessions(app_name=APP))
    assert every <= 5 + 6, every  # 5 session rows, the app row, 2 user rows
    run(fill("short3", 2))
    run(fill("later", 200))  # more events elsewhere: listing costs one more row per session
    assert rows_read.of(svc.list_sessions(app_name=APP, user_id=USER)) <= mine + 2 + 2


def test_from_url_close_closes_only_its_own_store(store, url: str, database: str) -> None:
    async def go():
        owned = MysqlSessionService.from_url(url, database_name=database)
        await owned.create_session(app_name=APP, user_id=USER, session_id="s")
        await owned.close()
        with pytest.raises(RuntimeError, match="closed"):
            await owned.get_session(app_name=APP, user_id=USER, session_id="s")
        shared = MysqlSessionService(store)
        await shared.close()
        assert await shared.get_session(app_name=APP, user_id=USER, session_id="s") is not None
    run(go())


def test_an_agent_keeps_its_conversation_across_a_process_restart(url: str) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from restart_demo import check_restart

    check_restart(str(ROOT / "examples" / "adk_restart.py"), url)


def _hello_model() -> dict:
    """``model`` for the adapter's examples: an offline ADK model that answers "hello"."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse

    class Hello(BaseLlm):
        async def generate_content_async(self, llm_request, stream: bool = False):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="hello")]))

    return {"model": Hello(model="hello")}


def test_the_modules_docstring_examples_run(url: str, database: str, monkeypatch) -> None:
    """mysql_state.adk's examples (doctest) run here, in tests/doctest_run.py's namespace plus ``model``."""
    from tests.doctest_run import run_examples

    result = run_examples("mysql_state.adk", url, database, monkeypatch, lambda _url: _hello_model())
    assert result.attempted > 0, "mysql_state.adk lost its examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed (see above)"


def test_a_non_finite_float_in_state_is_refused_naming_the_state_key(svc, raw) -> None:
    """JSON has no NaN: refused before anything is written, naming the ADK state key (the
    store's own error named its internal row, 's:user:...')."""
    async def go():
        before = raw.all_rows()
        with pytest.raises(ValueError, match="create_session: state key 'score' holds the float nan"):
            await svc.create_session(app_name=APP, user_id=USER, session_id="nan-1", state={"ok": 1, "score": float("nan")})
        assert raw.all_rows() == before
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="nan-1", state={"temp:x": float("inf")})
        before = raw.all_rows()
        with pytest.raises(ValueError, match="append_event: state key 'user:bad' holds the float inf"):
            await svc.append_event(s, delta_event({"user:bad": {"v": [float("inf")]}}))
        assert raw.all_rows() == before
        assert (await svc.get_session(app_name=APP, user_id=USER, session_id="nan-1")).events == []

    run(go())


def test_events_lost_behind_the_stores_back_are_damage_not_a_shorter_session(svc, raw) -> None:
    """The session's row names the event appended last; events deleted by hand (the whole list,
    or its hash row and last event) came back as a session with fewer or no events, once the
    locked read agreed no better (audit of 2026-12-07). Now CorruptStateError."""
    from mysql_state import CorruptStateError

    async def go():
        for sid in ("lost-all", "lost-last"):
            s = await svc.create_session(app_name=APP, user_id=USER, session_id=sid)
            for i in range(4):
                await svc.append_event(s, Event(author="user", invocation_id=f"inv{i}",
                                                content=types.Content(role="user", parts=[types.Part(text=f"m{i}")])))
        events = lambda sid: f"adk.{encode_id(APP)}:e:{encode_id(USER)}:{encode_id(sid)}"  # noqa: E731
        raw.execute("DELETE FROM {t} WHERE session_id = %s", (events("lost-all"),))
        raw.execute("DELETE FROM {t} WHERE session_id = %s AND (state_key = 'events:_hash' OR item_index = 3)",
                    (events("lost-last"),))
        for sid in ("lost-all", "lost-last"):
            with pytest.raises(CorruptStateError, match="events were lost"):
                await svc.get_session(app_name=APP, user_id=USER, session_id=sid)
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="whole")  # an intact one reads
        assert (await svc.get_session(app_name=APP, user_id=USER, session_id="whole")).id == s.id

    run(go())


def test_forget_user_erases_one_adk_user_and_nothing_else(svc, store, raw) -> None:
    """Every ADK user of an app is one store user (adk.<app>): the store's forget_user(user)
    erased none of them, and forget_user("adk.<app>") every user (operator audit of
    2026-12-07). The adapter's forget_user erases one user's sessions, events and user: state;
    the app: state and the other users stay."""
    async def go():
        for user in ("alice", "bob"):
            for sid in ("s1", "s2"):
                s = await svc.create_session(app_name=APP, user_id=user, session_id=sid,
                                             state={"app:theme": "dark", "user:lang": user, "k": sid})
                await svc.append_event(s, delta_event({"x": 1}))
        owner = f"adk.{encode_id(APP)}"
        raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s",  # events left without a row
                    (f"{owner}:index", f"s:{encode_id('alice')}:{encode_id('s2')}"))
        assert store.forget_user("alice") == 0  # the store's: no such store user
        assert await svc.forget_user(app_name=APP, user_id="alice") == 2
        left = raw.query("SELECT session_id, state_key FROM {t} WHERE session_id LIKE %s OR state_key LIKE %s",
                         (f"%:e:{encode_id('alice')}:%", f"%:{encode_id('alice')}%"))
        assert left == []
        assert (await svc.list_sessions(app_name=APP, user_id="alice")).sessions == []
        assert await svc.get_user_state(app_name=APP, user_id="alice") == {}
        bob = await svc.get_session(app_name=APP, user_id="bob", session_id="s1")
        assert bob.state == {"app:theme": "dark", "user:lang": "bob", "k": "s1", "x": 1} and len(bob.events) == 1
        assert await svc.forget_user(app_name=APP, user_id="alice") == 0
        s = await svc.create_session(app_name=APP, user_id=" ", state={"user:email": "x@y"})  # an ADK user too
        assert await svc.forget_user(app_name=APP, user_id=" ") == 1
        assert await svc.get_session(app_name=APP, user_id=" ", session_id=s.id) is None
        assert await svc.get_user_state(app_name=APP, user_id=" ") == {}
        with pytest.raises(TypeError, match="user_id must be a str"):
            await svc.forget_user(app_name=APP, user_id=None)

    run(go())


def test_prune_deletes_idle_adk_sessions_whole(svc, raw) -> None:
    """The store's prune deletes whole store sessions: on ADK's layout it took an idle
    session's events and left its row in the app's index, which then read as damage (operator
    audit of 2026-12-07). The adapter's prune deletes a session's events and row together, by
    its last_update_time; an active one stays."""
    import datetime as dt

    async def go():
        old = await svc.create_session(app_name=APP, user_id=USER, session_id="idle")
        await svc.append_event(old, delta_event({"x": 1}, timestamp=time.time() - 3 * 86400))
        live = await svc.create_session(app_name=APP, user_id=USER, session_id="live")
        await svc.append_event(live, delta_event({"x": 2}))
        assert await svc.prune(app_name=APP, older_than=dt.timedelta(days=1)) == 1
        assert await svc.get_session(app_name=APP, user_id=USER, session_id="idle") is None
        assert [s.id for s in (await svc.list_sessions(app_name=APP, user_id=USER)).sessions] == ["live"]
        assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE %s", ("%:e:%idle",))[0][0] == 0
        assert len((await svc.get_session(app_name=APP, user_id=USER, session_id="live")).events) == 1
        with pytest.raises(ValueError, match="timedelta"):
            await svc.prune(app_name=APP, older_than=-1)

    run(go())


def test_a_misspelt_from_url_option_names_the_adapters_own(url: str) -> None:
    """from_url(create_table=True) got no hint, and create_if_not_exist= a "multiple values"
    error (review of 2026-12-07): both name the adapter's create_tables."""
    with pytest.raises(TypeError, match="did you mean 'create_tables'"):
        MysqlSessionService.from_url(url, create_table=True)
    with pytest.raises(TypeError, match="option for it is create_tables="):
        MysqlSessionService.from_url(url, create_if_not_exist=True)


def test_two_appends_at_once_on_one_session_object_both_land(svc, raw) -> None:
    """Two ``append_event`` calls at once on the one Session object (ADK's live tool caller
    does that): both stored in order, as DatabaseSessionService's per-session lock gives;
    before, the second read the revision before the first committed and was refused stale."""
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="both")
        got = await asyncio.gather(*(svc.append_event(s, delta_event({f"k{i}": i}, invocation_id=f"inv{i}"))
                                     for i in range(4)), return_exceptions=True)
        assert [type(r).__name__ for r in got] == ["Event"] * 4, got
        stored = await svc.get_session(app_name=APP, user_id=USER, session_id="both")
        assert [e.invocation_id for e in stored.events] == ["inv0", "inv1", "inv2", "inv3"] == [
            e.invocation_id for e in s.events]
        assert stored.state == {"k0": 0, "k1": 1, "k2": 2, "k3": 3}
    run(go())
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE %s AND state_key = 'events'", ("%:both",)) == [(4,)]


def test_an_event_delivered_again_is_stored_once_and_another_with_its_id_is_refused(svc, raw) -> None:
    """The same event appended again (a retry, on the same Session object or on one loaded
    again) is stored once and changes nothing; a different event with an id the session
    already holds raises AlreadyExistsError, nothing written (DatabaseSessionService refuses
    a duplicate id by its primary key; before, both were stored)."""
    async def go():
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="dup")
        first = delta_event({"n": 1}, invocation_id="inv1", id="evt-1")
        await svc.append_event(s, first)
        assert await svc.append_event(s, first) is first  # the same object again
        again = await svc.get_session(app_name=APP, user_id=USER, session_id="dup")
        assert isinstance(await svc.append_event(again, first.model_copy(deep=True)), Event)  # an equal copy
        await svc.append_event(again, delta_event({"n": 2}, invocation_id="inv2", id="evt-2"))
        before = raw.all_rows()
        with pytest.raises(AlreadyExistsError, match="evt-1 already exists in session dup; nothing was written"):
            await svc.append_event(again, delta_event({"n": 3}, invocation_id="other", id="evt-1"))
        fresh = await svc.get_session(app_name=APP, user_id=USER, session_id="dup")
        with pytest.raises(AlreadyExistsError, match="evt-2 already exists"):  # stored last, not held: read
            fresh.events = []
            await svc.append_event(fresh, delta_event({"n": 4}, invocation_id="other", id="evt-2"))
        assert raw.all_rows() == before
        final = await svc.get_session(app_name=APP, user_id=USER, session_id="dup")
        assert [e.id for e in final.events] == ["evt-1", "evt-2"] and final.state == {"n": 2}
        assert [e.id for e in again.events] == ["evt-1", "evt-2"]
    run(go())


def test_bad_ids_and_values_are_named_as_adk_names_them(svc, raw) -> None:
    """An id that utf8mb4 cannot hold names the ADK argument, a state value JSON cannot hold
    names its state key (prefix included), an event that cannot be stored names the event;
    nothing is written. Before, the store's own rows were named ('adk.a\\ud800', 's:u:s3')."""
    async def go():
        before = raw.all_rows()
        for kw, name in (({"app_name": "a\ud800"}, "app_name"), ({"user_id": "u\ud800"}, "user_id"),
                         ({"session_id": "s\ud800"}, "session_id")):
            args = {"app_name": APP, "user_id": USER, "session_id": "s", **kw}
            with pytest.raises(ValueError, match=f"^{name} .* is not valid Unicode text"):
                await svc.create_session(**args)
        with pytest.raises(ValueError, match="^user_id .* is not valid Unicode text"):
            await svc.get_user_state(app_name=APP, user_id="u\ud800")
        with pytest.raises(TypeError, match=r"create_session: state key 'k' cannot be stored as JSON \(Integer "
                                            r"exceeds 64-bit range\); nothing was written"):
            await svc.create_session(app_name=APP, user_id=USER, session_id="s3", state={"k": 2 ** 70})
        with pytest.raises(ValueError, match="create_session: state key 'user:k' holds the float nan"):
            await svc.create_session(app_name=APP, user_id=USER, session_id="s4", state={"user:k": {float("nan")}})
        assert raw.all_rows() == before
        s = await svc.create_session(app_name=APP, user_id=USER, session_id="s5")
        before = raw.all_rows()
        with pytest.raises(TypeError, match="append_event: event 'big' of session 's5' cannot be stored as JSON"):
            await svc.append_event(s, Event(id="big", invocation_id="i", author="user", custom_metadata={"n": 2 ** 70}))
        with pytest.raises(TypeError, match="append_event: state key 'app:big' cannot be stored as JSON"):
            await svc.append_event(s, delta_event({"app:big": -(2 ** 65)}))
        assert raw.all_rows() == before and s.events == []
    run(go())


def test_an_app_name_too_long_for_the_app_index_is_refused_naming_the_ids(svc) -> None:
    """With an empty user id and a one-character session id, a long app name passed the length
    check and the store refused its own index id, naming 'adk.AAA...' and 'index', not the ADK
    ids (found by an adapter audit)."""
    app = "A" * 246
    with pytest.raises(ValueError, match="app_name 'AAAA.*are too long together"):
        run(svc.create_session(app_name=app, user_id="", session_id="s"))
    with pytest.raises(ValueError, match="are too long together"):
        run(svc.list_sessions(app_name=app, user_id=""))



# ---- damaged rows: a typed error naming the ADK session, never a wrong answer ---------------------
#
# Audit of 2026-12-08: a session's row replaced by hand ('[1,2]', '{"state":{}}') made get_session
# and the whole list_sessions raise a bare TypeError or KeyError, and prune skip the session
# silently. Each shape below is written with plain SQL; the calls must raise CorruptStateError
# naming the ADK session (app, user, id), its row and what is wrong, and write nothing.

#: A session's row as found: (its text, what the error says is wrong).
DAMAGED_RECORDS = {
    "a-list": ("[1,2]", "holds a list \\[1, 2\\], not the session's record"),
    "missing-fields": ('{"state":{}}', "holds a record without 'update_time'"),
    "not-json": ('{"state": {', "cannot be read by the store \\(.*is not valid JSON"),
    "state-not-a-map": ('{"state":[1],"update_time":1.5,"marker":"m","last":null}',
                        "holds a record whose 'state' is a list \\[1\\], not a map"),
    "update-time-a-str": ('{"state":{},"update_time":"1.5","marker":"m"}',
                          "holds a record whose 'update_time' is a str '1.5', not a number"),
    "marker-a-number": ('{"state":{},"update_time":1.5,"marker":7}', "'marker' is a number 7, not a non-empty str"),
    "null": ("null", "holds null, not the session's record"),
}
DAMAGED_USER = "ADK session 'b' of user 'u', app 'my_app' cannot be read: its row 's:u:b' of store session 'adk.my_app:index' "


def _index_sid() -> str:
    return f"adk.{encode_id(APP)}:index"


def _three_sessions(svc, raw, text: str) -> dict:
    """Sessions a, b and c of user 'u' (an event each, state of every scope), then b's row
    replaced by ``text``: the Session objects as loaded before."""
    async def go():
        loaded = {}
        for sid in "abc":
            s = await svc.create_session(app_name=APP, user_id="u", session_id=sid,
                                         state={"k": sid, "user:lang": "en", "app:theme": "dark"})
            await svc.append_event(s, delta_event({"n": 1}, invocation_id=f"inv-{sid}"))
            loaded[sid] = s
        return loaded
    loaded = run(go())
    assert raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = 's:u:b'",
                       (text, _index_sid())) == 1
    return loaded


def _assert_names_b(exc, wrong: str) -> None:
    from mysql_state import CorruptStateError

    assert type(exc.value) is CorruptStateError, repr(exc.value)
    assert str(exc.value).startswith(DAMAGED_USER), str(exc.value)
    assert re.search(wrong, str(exc.value)), (wrong, str(exc.value))
    assert (exc.value.session_id, exc.value.key) == (_index_sid(), "s:u:b")


@pytest.mark.parametrize("shape", sorted(DAMAGED_RECORDS))
def test_get_session_of_a_damaged_row_names_the_session(svc, raw, shape) -> None:
    from mysql_state import CorruptStateError

    text, wrong = DAMAGED_RECORDS[shape]
    _three_sessions(svc, raw, text)
    before = raw.all_rows()
    for config in (None, GetSessionConfig(num_recent_events=1)):
        with pytest.raises(CorruptStateError) as exc:
            run(svc.get_session(app_name=APP, user_id="u", session_id="b", config=config))
        _assert_names_b(exc, wrong)
        assert "nothing of it was returned" in str(exc.value) and "delete_session removes the session" in str(exc.value)
    assert run(svc.get_session(app_name=APP, user_id="u", session_id="a")).state["k"] == "a"  # the others read
    assert raw.all_rows() == before


@pytest.mark.parametrize("shape", sorted(DAMAGED_RECORDS))
def test_list_sessions_with_a_damaged_row_raises_naming_it(svc, raw, shape) -> None:
    """No silent partial listing: the typed error names the damaged session; nothing written."""
    from mysql_state import CorruptStateError

    text, wrong = DAMAGED_RECORDS[shape]
    _three_sessions(svc, raw, text)
    before = raw.all_rows()
    for user in ("u", None):
        with pytest.raises(CorruptStateError) as exc:
            run(svc.list_sessions(app_name=APP, user_id=user))
        _assert_names_b(exc, wrong)
        assert "no session was listed" in str(exc.value)
    assert raw.all_rows() == before


def test_list_sessions_names_every_damaged_session(svc, raw) -> None:
    from mysql_state import CorruptStateError

    _three_sessions(svc, raw, "[1,2]")
    raw.execute("UPDATE {t} SET state_data = '{\"state\":{}}' WHERE session_id = %s AND state_key = 's:u:c'",
                (_index_sid(),))
    with pytest.raises(CorruptStateError) as exc:
        run(svc.list_sessions(app_name=APP, user_id="u"))
    _assert_names_b(exc, "holds a list")
    assert "(also damaged: ADK session 'c' of user 'u', app 'my_app' (row 's:u:c'))" in str(exc.value)
    for sid in "bc":  # the way out the error names: delete_session reads none of the session's rows
        run(svc.delete_session(app_name=APP, user_id="u", session_id=sid))
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE state_key IN ('s:u:b', 's:u:c') OR session_id LIKE %s "
                     "OR session_id LIKE %s", ("%:e:u:b", "%:e:u:c")) == [(0,)]
    assert [s.id for s in run(svc.list_sessions(app_name=APP, user_id="u")).sessions] == ["a"]


@pytest.mark.parametrize("shape", sorted(DAMAGED_RECORDS))
def test_append_event_to_a_damaged_row_writes_nothing(svc, raw, shape) -> None:
    from mysql_state import CorruptStateError

    text, wrong = DAMAGED_RECORDS[shape]
    loaded = _three_sessions(svc, raw, text)
    before = raw.all_rows()
    b = loaded["b"]
    with pytest.raises(CorruptStateError) as exc:
        run(svc.append_event(b, delta_event({"n": 2, "user:lang": "fr", "app:theme": "light"}, invocation_id="x")))
    _assert_names_b(exc, wrong)
    assert "nothing was written" in str(exc.value)
    b._storage_update_marker = None  # a Session object without a marker reads the row the same way
    with pytest.raises(CorruptStateError):
        run(svc.append_event(b, delta_event({"n": 3}, invocation_id="y")))
    with pytest.raises(CorruptStateError):  # the id is taken by a row that does not read: not overwritten
        run(svc.create_session(app_name=APP, user_id="u", session_id="b"))
    assert raw.all_rows() == before


#: The app's and a user's shared state rows as found: (key, text, what the error says is wrong).
DAMAGED_STATE = {
    "app-a-list": ("app", "[1]", "the app: state of app 'my_app' cannot be read: its row 'app' .* holds a list "
                                 "\\[1\\], not a map of app: state"),
    "user-pairs": ("u:u", '[["lang", "xx"]]', "the user: state of user 'u', app 'my_app' cannot be read: its row "
                                             "'u:u' .* holds a list .*, not a map of user: state"),
    "user-null": ("u:u", "null", "the user: state of user 'u', app 'my_app' cannot be read: .* holds null"),
    "user-not-json": ("u:u", "{", "the user: state of user 'u', app 'my_app' cannot be read: .* cannot be read by "
                                  "the store"),
}


@pytest.mark.parametrize("shape", sorted(DAMAGED_STATE))
def test_damaged_shared_state_rows_are_named_by_every_call_that_reads_them(svc, raw, shape) -> None:
    """get_user_state read a list of pairs as a dict and a null row as {} (no state yet)."""
    from mysql_state import CorruptStateError

    key, text, wrong = DAMAGED_STATE[shape]
    loaded = _three_sessions(svc, raw, '{"state":{},"update_time":1.5,"marker":"m","last":null}')
    raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = %s", (text, _index_sid(), key))
    before = raw.all_rows()
    calls = [svc.get_session(app_name=APP, user_id="u", session_id="a"), svc.list_sessions(app_name=APP, user_id="u"),
             svc.list_sessions(app_name=APP),
             svc.create_session(app_name=APP, user_id="u", session_id="d", state={"app:x": 1, "user:x": 1}),
             svc.append_event(loaded["a"], delta_event({"app:x": 1, "user:x": 1}, invocation_id="x"))]
    if key != "app":
        calls.append(svc.get_user_state(app_name=APP, user_id="u"))
    for call in calls:
        with pytest.raises(CorruptStateError, match=wrong) as exc:
            run(call)
        assert exc.value.key == key and f"store.delete('adk.my_app', 'index', '{key}')" in str(exc.value)
    assert raw.all_rows() == before


#: An event's row as found, made from the row as stored: (its text, what the error says is wrong).
DAMAGED_EVENTS = {
    "a-list": (lambda e: "[1]", "holds a list \\[1\\], not an event"),
    "empty-map": (lambda e: "{}", "holds an event without 'id'"),
    "not-json": (lambda e: '{"id": ', "cannot be read by the store \\(.*is not valid JSON"),
    "timestamp-a-str": (lambda e: json.dumps({**e, "timestamp": "soon"}),
                        "holds an event whose 'timestamp' is a str 'soon', not a number"),
    "id-empty": (lambda e: json.dumps({**e, "id": ""}), "holds an event whose 'id' is a str '', not a non-empty str"),
    "adk-cannot-read": (lambda e: json.dumps({**e, "actions": 5}),
                        "holds an event ADK cannot read \\(1 problem\\(s\\), the first at actions"),
    "null": (lambda e: "null", "holds null, not an event"),
}
DAMAGED_EVENTS_OF_B = ("the events of ADK session 'b' of user 'u', app 'my_app' cannot be read: its event "
                       "{at} (row of list 'events', store session 'adk.my_app:e:u:b') ")


def _damage_event(raw, index: int, make) -> None:
    sid = f"adk.{encode_id(APP)}:e:u:b"
    (text,) = raw.query("SELECT state_data FROM {t} WHERE session_id = %s AND state_key = 'events' "
                        "AND item_index = %s", (sid, index))[0]
    _damage_event_of(raw, "b", index, make(json.loads(text)))


def _damage_event_of(raw, session: str, index: int, text: str) -> None:
    assert raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = 'events' "
                       "AND item_index = %s", (text, f"adk.{encode_id(APP)}:e:u:{session}", index)) == 1


def _b_with_three_events(svc, raw) -> Session:
    loaded = _three_sessions(svc, raw, "[]")
    run(svc.delete_session(app_name=APP, user_id="u", session_id="b"))

    async def go():
        b = await svc.create_session(app_name=APP, user_id="u", session_id="b", state={"k": "b"})
        for i in range(3):
            await svc.append_event(b, delta_event({"n": i}, invocation_id=f"b{i}", timestamp=1000.0 + i))
        return b
    loaded["b"] = run(go())
    return loaded["b"]


@pytest.mark.parametrize("shape", sorted(DAMAGED_EVENTS))
def test_get_session_with_a_damaged_event_names_it(svc, raw, shape) -> None:
    """An event row that is not what append_event writes: before, a bare AttributeError, an
    Event made up with a new id (a row '{}'), or "events were lost" after five reads."""
    from mysql_state import CorruptStateError

    make, wrong = DAMAGED_EVENTS[shape]
    _b_with_three_events(svc, raw)
    _damage_event(raw, 2, make)  # the last one: every read of b reads it
    before = raw.all_rows()
    for config, at in ((None, "2"), (GetSessionConfig(num_recent_events=2), "-1 \\(counted from the end\\)"),
                       (GetSessionConfig(after_timestamp=1001.0), "-1 \\(counted from the end\\)")):
        if shape == "not-json" and config is not None:
            at = "2"  # the store names the row it could not decode by its index
        with pytest.raises(CorruptStateError) as exc:
            run(svc.get_session(app_name=APP, user_id="u", session_id="b", config=config))
        message = str(exc.value)
        assert re.match(DAMAGED_EVENTS_OF_B.format(at=at).replace("(row", "\\(row").replace("b') ", "b'\\) "),
                        message), message
        assert re.search(wrong, message) and "delete_session removes the session" in message, message
        assert "nothing of it was returned" in message
        assert (exc.value.session_id, exc.value.key) == (f"adk.{encode_id(APP)}:e:u:b", "events")
        assert exc.value.index == (2 if at == "2" else None)
    assert run(svc.get_session(app_name=APP, user_id="u", session_id="a")).state["k"] == "a"
    assert [s.id for s in run(svc.list_sessions(app_name=APP, user_id="u")).sessions] == ["b", "a", "c"]
    assert raw.all_rows() == before


@pytest.mark.parametrize("shape", ["empty-map", "adk-cannot-read"])
def test_an_earlier_damaged_event_is_named_by_its_index(svc, raw, shape) -> None:
    """A row '{}' among the events read as an Event with a new id and the time of the read."""
    from mysql_state import CorruptStateError

    make, wrong = DAMAGED_EVENTS[shape]
    _b_with_three_events(svc, raw)
    _damage_event(raw, 0, make)
    with pytest.raises(CorruptStateError, match=re.escape(DAMAGED_EVENTS_OF_B.format(at="0")) + wrong) as exc:
        run(svc.get_session(app_name=APP, user_id="u", session_id="b"))
    assert exc.value.index == 0
    recent = run(svc.get_session(app_name=APP, user_id="u", session_id="b", config=GetSessionConfig(num_recent_events=2)))
    assert [e.invocation_id for e in recent.events] == ["b1", "b2"]  # the rows read are whole


@pytest.mark.parametrize("shape", sorted(DAMAGED_EVENTS))
def test_append_event_reading_a_damaged_last_event_writes_nothing(svc, raw, shape) -> None:
    """append_event reads the last event when the Session object has no marker, and when the
    event's id is the one the row says was appended last (a retry): damage there is the typed
    error, never StaleSessionError nor AlreadyExistsError."""
    from mysql_state import CorruptStateError

    make, wrong = DAMAGED_EVENTS[shape]
    b = _b_with_three_events(svc, raw)
    last = b.events[-1]
    _damage_event(raw, 2, make)
    before = raw.all_rows()
    markerless = b.model_copy(deep=True)
    markerless._storage_update_marker, markerless.last_update_time = None, 0.0
    retry = b.model_copy(deep=True)
    retry.events = []
    retry._storage_update_marker = b._storage_update_marker
    for session, event in ((markerless, delta_event({"n": 9}, invocation_id="x")), (retry, last.model_copy(deep=True))):
        with pytest.raises(CorruptStateError) as exc:
            run(svc.append_event(session, event))
        assert str(exc.value).startswith("the events of ADK session 'b' of user 'u', app 'my_app' cannot be read")
        assert re.search(wrong, str(exc.value)) and "nothing was written" in str(exc.value), str(exc.value)
    assert raw.all_rows() == before


@pytest.mark.parametrize("shape", sorted(DAMAGED_RECORDS))
def test_prune_with_a_damaged_row_deletes_nothing_and_names_it(svc, raw, shape) -> None:
    """prune skipped a session whose row did not read, silently, and pruned the others (audit of
    2026-12-08: it returned 1 and left b and c). Its age unknown, a damaged session is neither
    skipped nor deleted: the typed error names it before any session is deleted; once it is
    deleted (or repaired) prune runs. A session's events are not read: damaged, they go with it."""
    import datetime as dt

    from mysql_state import CorruptStateError

    text, wrong = DAMAGED_RECORDS[shape]
    _three_sessions(svc, raw, text)
    before = raw.all_rows()
    with pytest.raises(CorruptStateError) as exc:
        run(svc.prune(app_name=APP, older_than=dt.timedelta(0)))
    _assert_names_b(exc, wrong)
    assert "nothing was pruned" in str(exc.value)
    assert raw.all_rows() == before  # a, older than the cutoff and sorted before b, is not deleted either
    run(svc.delete_session(app_name=APP, user_id="u", session_id="b"))
    _damage_event_of(raw, "c", 0, "[1]")
    assert run(svc.prune(app_name=APP, older_than=dt.timedelta(0))) == 2
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE %s OR state_key LIKE 's:%%'",
                     (f"adk.{encode_id(APP)}:e:%",)) == [(0,)]


def test_prune_stopped_by_a_row_damaged_meanwhile_says_what_it_pruned_and_resumes(svc, raw, monkeypatch) -> None:
    """A row damaged between prune's read of the rows and the transaction that deletes its
    session: the sessions before it stay deleted (each whole), none after it is touched, the
    error says so; prune again after the damaged session is deleted finishes the work."""
    import datetime as dt

    from mysql_state import CorruptStateError

    _three_sessions(svc, raw, '{"state":{},"update_time":1.5,"marker":"m","last":null}')  # b: healthy, old
    real, calls = svc.store.transaction, []

    async def damaging_b_before_its_turn(fn):  # the real transaction, after another writer's damage
        calls.append(fn)
        if len(calls) == 2:
            raw.execute("UPDATE {t} SET state_data = '[1,2]' WHERE session_id = %s AND state_key = 's:u:b'",
                        (_index_sid(),))
        return await real(fn)

    monkeypatch.setattr(svc.store, "transaction", damaging_b_before_its_turn)
    with pytest.raises(CorruptStateError) as exc:
        run(svc.prune(app_name=APP, older_than=dt.timedelta(0)))
    monkeypatch.undo()
    _assert_names_b(exc, "holds a list")
    assert "it was not pruned, nor any session after it in key order (1 before it were, each whole)" in str(exc.value)
    keys_left = [r[0] for r in raw.query("SELECT state_key FROM {t} WHERE session_id = %s AND state_key LIKE 's:%%' "
                                         "ORDER BY state_key", (_index_sid(),))]
    assert keys_left == ["s:u:b", "s:u:c"]
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE %s", ("%:e:u:a",)) == [(0,)]
    assert raw.query("SELECT COUNT(*) FROM {t} WHERE session_id LIKE %s", ("%:e:u:c",)) == [(2,)]  # event, hash row
    run(svc.delete_session(app_name=APP, user_id="u", session_id="b"))
    assert run(svc.prune(app_name=APP, older_than=dt.timedelta(0))) == 1
    assert run(svc.list_sessions(app_name=APP)).sessions == []


# ---- progress of prune and forget_user -------------------------------------------------------------


def _idle_and_live(svc, app: str, user: str = "u") -> None:
    """Sessions i0, i1, i2 of ``app`` idle three days (an event each), and 'live' active now."""
    async def go():
        for sid in ("i0", "i1", "i2"):
            s = await svc.create_session(app_name=app, user_id=user, session_id=sid, state={"user:lang": "en"})
            await svc.append_event(s, delta_event({"k": sid}, timestamp=time.time() - 3 * 86400))
        s = await svc.create_session(app_name=app, user_id=user, session_id="live")
        await svc.append_event(s, delta_event({"k": "live"}))
    run(go())


def _sessions_by_sql(raw, app: str) -> dict:
    """``{(user, session): (index rows, event-session rows)}`` of ``app``, by plain SQL."""
    index = f"adk.{encode_id(app)}:index"
    out: dict = {}
    for (key,) in raw.query("SELECT state_key FROM {t} WHERE session_id = %s AND state_key LIKE 's:%%'", (index,)):
        out.setdefault(tuple(map(decode_id, key.split(":")[1:])), [0, 0])[0] += 1
    for sid, n in raw.query("SELECT session_id, COUNT(*) FROM {t} WHERE session_id LIKE %s GROUP BY session_id",
                            (f"adk.{encode_id(app)}:e:%",)):
        out.setdefault(tuple(map(decode_id, sid.split(":")[-2:])), [0, 0])[1] += n
    return {k: tuple(v) for k, v in out.items()}


def _stopping_at(stop: int, error: BaseException, calls: list):
    """A progress callback recording its calls in ``calls``, raising ``error`` when done is ``stop``."""
    def progress(done, total):
        calls.append((done, total))
        if done == stop:
            raise error
    return progress


def test_prune_reports_the_sessions_pruned_of_those_found_idle_and_sends_nothing_more(svc, raw) -> None:
    """``progress(done, total)`` once the rows are read and checked, then after each session's
    transaction: ``done`` the sessions pruned, ``total`` those found idle. Two apps alike, one
    pruned with a callback: the same statements. A non-callable or an async def is refused
    before any statement."""
    import datetime as dt

    _idle_and_live(svc, "app_a")
    _idle_and_live(svc, "app_b")
    run(svc.list_sessions(app_name="app_a"))  # the pool warm
    live = _sessions_by_sql(raw, "app_b")[("u", "live")]
    assert live[0] == 1 and live[1] >= 2  # the row; the event and the hash row
    assert _sessions_by_sql(raw, "app_b") == {("u", sid): live for sid in ("i0", "i1", "i2", "live")}
    day = dt.timedelta(days=1)
    pruned, sent = raw.statements(lambda: run(svc.prune(app_name="app_a", older_than=day)))
    calls: list = []
    pruned_b, sent_with_progress = raw.statements(
        lambda: run(svc.prune(app_name="app_b", older_than=day, progress=lambda done, total: calls.append((done, total)))))
    assert (pruned, pruned_b) == (3, 3)
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert sent_with_progress == sent
    assert _sessions_by_sql(raw, "app_a") == _sessions_by_sql(raw, "app_b") == {("u", "live"): live}
    calls.clear()
    assert run(svc.prune(app_name="app_b", older_than=day, progress=lambda *a: calls.append(a))) == 0
    assert calls == [(0, 0)]
    before = raw.com_counts()
    with pytest.raises(TypeError, match="progress must be a callable, got str: 'bar'"):
        run(svc.prune(app_name="app_b", older_than=dt.timedelta(0), progress="bar"))

    async def later(done, total):
        pass

    with pytest.raises(TypeError, match="progress must be a plain function"):
        run(svc.prune(app_name="app_b", older_than=dt.timedelta(0), progress=later))
    assert raw.com_counts() == before  # refused before any statement
    assert _sessions_by_sql(raw, "app_b") == {("u", "live"): live}


def test_a_progress_callback_that_raises_stops_prune_with_each_session_whole(svc, raw) -> None:
    """The callback's error is prune's; the sessions before it stay deleted (each in its own
    transaction), the rest are as they were, and a prune run again finishes."""
    import datetime as dt

    _idle_and_live(svc, APP)
    whole = _sessions_by_sql(raw, APP)
    calls: list = []
    with pytest.raises(KeyboardInterrupt, match="enough"):
        run(svc.prune(app_name=APP, older_than=dt.timedelta(days=1),
                      progress=_stopping_at(2, KeyboardInterrupt("enough"), calls)))
    assert calls == [(0, 3), (1, 3), (2, 3)]
    assert _sessions_by_sql(raw, APP) == {k: whole[k] for k in (("u", "i2"), ("u", "live"))}  # i0, i1 gone whole
    calls.clear()
    assert run(svc.prune(app_name=APP, older_than=dt.timedelta(days=1), progress=lambda *a: calls.append(a))) == 1
    assert calls == [(0, 1), (1, 1)]
    assert _sessions_by_sql(raw, APP) == {("u", "live"): whole[("u", "live")]}


def test_prune_with_a_damaged_row_calls_no_progress(svc, raw) -> None:
    """The damaged row is named before any session is deleted, and before any progress call."""
    import datetime as dt

    from mysql_state import CorruptStateError

    _three_sessions(svc, raw, "[1,2]")
    before, calls = raw.all_rows(), []
    with pytest.raises(CorruptStateError) as exc:
        run(svc.prune(app_name=APP, older_than=dt.timedelta(0), progress=lambda *a: calls.append(a)))
    _assert_names_b(exc, "holds a list")
    assert calls == [] and raw.all_rows() == before


def test_forget_user_reports_the_sessions_erased_of_those_found_and_sends_nothing_more(svc, raw) -> None:
    """``progress(done, total)`` once the user's sessions are found (a session's events left
    without a row among them), then after each session's transaction. Two users alike, one
    erased with a callback: the same statements; a non-callable is refused before any statement."""
    _idle_and_live(svc, APP, "alice")
    _idle_and_live(svc, APP, "bob")
    _idle_and_live(svc, APP, "carol")  # stays: erasing the index session's last row would cost a catalog delete
    index = f"adk.{encode_id(APP)}:index"
    for user in ("alice", "bob"):  # events left without a row: found, erased and counted too
        assert raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s", (index, f"s:{user}:i2")) == 1
    run(svc.list_sessions(app_name=APP))  # the pool warm
    erased, sent = raw.statements(lambda: run(svc.forget_user(app_name=APP, user_id="alice")))
    calls: list = []
    erased_b, sent_with_progress = raw.statements(lambda: run(svc.forget_user(
        app_name=APP, user_id="bob", progress=lambda done, total: calls.append((done, total)))))
    assert (erased, erased_b) == (4, 4)
    assert calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert sent_with_progress == sent
    assert {user for user, _ in _sessions_by_sql(raw, APP)} == {"carol"}
    assert raw.query("SELECT state_key FROM {t} WHERE session_id = %s AND state_key LIKE 'u:%%'", (index,)) == [
        ("u:carol",)]
    calls.clear()
    assert run(svc.forget_user(app_name=APP, user_id="bob", progress=lambda *a: calls.append(a))) == 0
    assert calls == [(0, 0)]
    rows, before = raw.all_rows(), raw.com_counts()
    with pytest.raises(TypeError, match="progress must be a callable, got int: 5"):
        run(svc.forget_user(app_name=APP, user_id="carol", progress=5))
    assert raw.com_counts() == before  # refused before any statement
    assert raw.all_rows() == rows


def test_a_progress_callback_that_raises_stops_forget_user_with_each_session_whole(svc, raw) -> None:
    """The callback's error is forget_user's; the sessions before it stay erased (each whole),
    the rest and the user: state are as they were, and forget_user run again finishes."""
    _idle_and_live(svc, APP, "alice")
    _idle_and_live(svc, APP, "bob")
    whole, index = _sessions_by_sql(raw, APP), f"adk.{encode_id(APP)}:index"

    def user_rows(user: str) -> list:
        return raw.query("SELECT state_key FROM {t} WHERE session_id = %s AND state_key = %s", (index, f"u:{user}"))

    assert user_rows("alice") == [("u:alice",)]
    calls: list = []
    with pytest.raises(RuntimeError, match="stop"):
        run(svc.forget_user(app_name=APP, user_id="alice", progress=_stopping_at(1, RuntimeError("stop"), calls)))
    assert calls == [(0, 4), (1, 4)]
    # alice's first session in key order (i0) erased whole, the rest as they were
    assert _sessions_by_sql(raw, APP) == {k: v for k, v in whole.items() if k != ("alice", "i0")}
    assert user_rows("alice") == [("u:alice",)]
    calls.clear()
    assert run(svc.forget_user(app_name=APP, user_id="alice", progress=lambda *a: calls.append(a))) == 3
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert user_rows("alice") == [] and user_rows("bob") == [("u:bob",)]
    assert len(run(svc.list_sessions(app_name=APP, user_id="bob")).sessions) == 4
    assert run(svc.list_sessions(app_name=APP, user_id="alice")).sessions == []
