"""LangGraph threads and memories whose rows were damaged behind the saver's back: every read
and every maintenance call raises a typed error naming what is damaged (CorruptStateError),
never "no checkpoint yet", never a thread pruned into a different valid one, never an untyped
KeyError / TypeError / IndexError from a row of the wrong shape (found by a damage audit).
Rows are damaged by plain SQL, and plain SQL shows that nothing was deleted."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra (make test installs it)")

from langchain_core.messages import HumanMessage  # noqa: E402

from mysql_state import CorruptStateError, keys  # noqa: E402
from mysql_state.langgraph import MysqlSaver, MysqlStore  # noqa: E402

from .test_langgraph_maintenance import chat  # noqa: E402 - the same one-node chat graph

USER = "lg-damage"


def thread(store, name: str, turns: int = 3) -> tuple[MysqlSaver, dict]:
    saver = MysqlSaver(store, user_id=USER)
    config = {"configurable": {"thread_id": name}}
    graph = chat(saver)
    for i in range(turns):
        graph.invoke({"messages": [HumanMessage(f"user {i}")]}, config)
    return saver, config


def rows(raw, name: str) -> list[tuple]:
    return raw.query("SELECT state_key, item_index, state_data FROM {t} WHERE session_id = %s"
                     " ORDER BY state_key, item_index", (keys.pack(USER, name),))


def newest_cp(raw, name: str) -> str:
    return max(r[0] for r in rows(raw, name) if r[0].startswith("cp/"))


def fresh(store) -> MysqlSaver:
    """A saver of another process: nothing remembered of the thread."""
    return MysqlSaver(store, user_id=USER)


def test_prune_of_a_thread_whose_newest_checkpoint_row_is_gone_raises_and_deletes_nothing(store, raw):
    """prune(keep_latest) kept nothing when the index's newest entry had no row, and deleted
    every row of the thread: it then read as "no checkpoint yet"."""
    saver, config = thread(store, "p1")
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s", (keys.pack(USER, "p1"), newest_cp(raw, "p1")))
    before = rows(raw, "p1")
    with pytest.raises(CorruptStateError, match="is missing, but the thread's index lists it"):
        fresh(store).prune(["p1"])
    assert rows(raw, "p1") == before


def test_a_thread_whose_index_is_gone_is_damage_not_a_new_thread(store, raw):
    """Its checkpoint rows there and its index deleted, the thread read as new: get_tuple gave
    None, and the next invoke started the conversation anew over the old rows."""
    saver, config = thread(store, "p2")
    sid = keys.pack(USER, "p2")
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key IN ('ix/~', 'ix/~:_hash')", (sid,))
    before = rows(raw, "p2")
    s = fresh(store)
    for call in (lambda: s.get_tuple(config),
                 lambda: chat(s).invoke({"messages": [HumanMessage("again")]}, config),
                 lambda: s.prune(["p2"])):
        with pytest.raises(CorruptStateError, match="has checkpoint rows but no index"):
            call()
    assert rows(raw, "p2") == before
    assert fresh(store).get_tuple({"configurable": {"thread_id": "never-written"}}) is None  # a new thread is new


def test_a_checkpoint_named_by_id_whose_row_is_gone_but_listed_is_damage(store, raw):
    saver, config = thread(store, "p3")
    first = list(saver.list(config))[-1].config
    raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s",
                (keys.pack(USER, "p3"), "cp/~/" + first["configurable"]["checkpoint_id"]))
    with pytest.raises(CorruptStateError, match="is missing, but the thread's index lists it"):
        fresh(store).get_tuple(first)
    other = {"configurable": {"thread_id": "p3", "checkpoint_id": "1f000000-0000-6000-8000-000000000000"}}
    assert fresh(store).get_tuple(other) is None  # an id that never was: none, as LangGraph's savers answer


WRONG_SHAPES = {
    "a checkpoint row without ns": ("cp", "JSON_REMOVE(state_data, '$.ns')", "its ns or id is missing"),
    "a checkpoint row naming another id": ("cp", "JSON_SET(state_data, '$.id', '1f000000-0000-6000-8000-0')",
                                           "are not those of its key"),
    "a list range below 0": ("cp", "JSON_SET(state_data, '$.lists.messages.r', JSON_ARRAY(JSON_ARRAY(-2, 0)))",
                             "has a range that is not"),
    "a list reference without its range": ("cp", "JSON_SET(state_data, '$.lists.messages', JSON_OBJECT('g', 'zz'))",
                                           "is not a log reference"),
    "metadata that is not a map": ("cp", "JSON_SET(state_data, '$.metadata', JSON_OBJECT('t', 'msgpack', 'v',"
                                         " JSON_OBJECT('~p', JSON_ARRAY(1, 2))))", "its metadata is not a map"),
    "a checkpoint cut short": ("cp", "JSON_SET(state_data, '$.checkpoint', JSON_OBJECT('t', 'msgpack', 'b', 'kw=='))",
                               "does not decode"),
    "an index item of another shape": ("ix", "'[12345, null, 12]'", "an item not \\[id, parent"),
}


@pytest.mark.parametrize("damage", sorted(WRONG_SHAPES))
def test_a_row_of_the_wrong_shape_is_a_typed_error_naming_it(store, raw, damage):
    """A row changed by hand into other valid JSON raised KeyError, TypeError, AttributeError,
    IndexError or ValueError from deep inside the saver, or read as another checkpoint."""
    saver, config = thread(store, f"w-{len(damage)}-{damage[:6]}")
    name = config["configurable"]["thread_id"]
    sid = keys.pack(USER, name)
    where, expression, says = WRONG_SHAPES[damage]
    if where == "cp":
        raw.execute(f"UPDATE {{t}} SET state_data = {expression} WHERE session_id = %s AND state_key = %s",
                    (sid, newest_cp(raw, name)))
    else:
        last = max(r[1] for r in rows(raw, name) if r[0] == "ix/~")
        raw.execute(f"UPDATE {{t}} SET state_data = {expression} WHERE session_id = %s AND state_key = 'ix/~'"
                    " AND item_index = %s", (sid, last))
    before = rows(raw, name)
    s = fresh(store)
    for call in (lambda: s.get_tuple(config), lambda: list(s.list(config)), lambda: s.prune([name])):
        with pytest.raises(CorruptStateError, match=says):
            call()
    assert rows(raw, name) == before


def test_pending_writes_of_the_wrong_shape_are_a_typed_error(store, raw):
    saver = MysqlSaver(store, user_id=USER)
    config = {"configurable": {"thread_id": "wr-1"}}
    from langgraph.checkpoint.base import empty_checkpoint

    saved = saver.put(config, empty_checkpoint(), {"step": 0}, {})
    saver.put_writes(saved, [("messages", "hi")], "task-1")
    raw.execute("UPDATE {t} SET state_data = JSON_REMOVE(state_data, '$.task') WHERE session_id = %s"
                " AND state_key LIKE 'wr/%%'", (keys.pack(USER, "wr-1"),))
    with pytest.raises(CorruptStateError, match="not a row of pending writes"):
        fresh(store).get_tuple(saved)


def test_memory_rows_of_the_wrong_shape_are_a_typed_error(store, raw):
    """MysqlStore: an item whose value is not a dict came back from get (search raised); a
    marker whose count is not a number raised TypeError from put."""
    memory = MysqlStore(store, user_id="lg-damage-memory")
    memory.put(("docs",), "a", {"text": "hello"})
    sid = "lg-damage-memory:langgraph-store"
    assert raw.query("SELECT state_key FROM {t} WHERE session_id = %s ORDER BY state_key", (sid,)) == [
        ("idocs..",), ("idocs..a.",)]  # the namespace's marker, the item
    raw.execute("UPDATE {t} SET state_data = JSON_SET(state_data, '$.value', JSON_ARRAY(1, 2))"
                " WHERE session_id = %s AND state_key = 'idocs..a.'", (sid,))
    with pytest.raises(CorruptStateError, match="its 'value' is not a dict"):
        memory.get(("docs",), "a")
    raw.execute("UPDATE {t} SET state_data = JSON_SET(state_data, '$.items', 'x') WHERE session_id = %s"
                " AND state_key = 'idocs..'", (sid,))
    with pytest.raises(CorruptStateError, match="holds no 'seq' or no 'items'"):
        memory.put(("docs",), "b", {"text": "again"})


def test_a_message_whose_payload_was_changed_by_hand_is_damage_not_none(store, raw):
    """LangGraph's serializer reads an object it cannot rebuild as None: a message of the log
    whose payload was cut by hand came back as None (or the graph failed later, untyped)."""
    saver, config = thread(store, "m1")
    sid = keys.pack(USER, "m1")
    log = next(r[0] for r in rows(raw, "m1") if r[0].startswith("log/") and not r[0].endswith(":_hash"))
    raw.execute("UPDATE {t} SET state_data = %s WHERE session_id = %s AND state_key = %s AND item_index = 1",
                ('{"t":"msgpack","v":{"~x":5,"b":"kwE="}}', sid, log))
    s = fresh(store)
    for call in (lambda: s.get_tuple(config), lambda: list(s.list(config, limit=1))):
        with pytest.raises(CorruptStateError, match="holds an object the serializer cannot read"):
            call()
