"""AsyncMysqlAgentStateStore against the real server: same operations and errors as the sync
store, a loop that keeps ticking during a burst, cancellation that leaves whole lists and a
usable pool, and a lifecycle that waits for running work."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import inspect
import subprocess
import sys
import threading
import time
import typing

import orjson
import pytest

from mysql_state import MysqlAgentStateStore, SchemaNotFoundError, UNVERSIONED
from mysql_state.errors import StoreClosedError
from mysql_state.aio import OPERATIONS, AsyncMysqlAgentStateStore
from mysql_state.listsync import HASH_FORMAT


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def astore(url: str, database: str):
    s = AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=4)
    yield s
    run(s.aclose())


def list_rows(raw, sid: str, key: str) -> tuple[list[bytes], dict | None]:
    """(item JSONs in index order, decoded hash row) straight from the table."""
    rows = raw.query(
        "SELECT item_index, state_data FROM {t} WHERE session_id=%s AND state_key=%s ORDER BY item_index",
        (sid, key),
    )
    assert [r[0] for r in rows] == list(range(len(rows))), f"gaps in item_index: {rows}"
    h = raw.query("SELECT state_data FROM {t} WHERE session_id=%s AND state_key=%s", (sid, key + ":_hash"))
    return [orjson.loads(r[1]) for r in rows], (orjson.loads(h[0][0]) if h else None)


# ---- the surface ---------------------------------------------------------------------------------


def test_every_sync_operation_has_a_coroutine_with_the_same_signature():
    """The twin cannot drift: every public sync operation has a coroutine whose signature is
    the sync one's, whole (names, kinds, defaults, annotations, the return annotation: the
    coroutine's result is the sync method's type); export is an async iterator."""
    public = {
        n
        for n, v in vars(MysqlAgentStateStore).items()
        if not n.startswith("_") and callable(v) and n not in ("from_url", "close", "session_lock")
    }
    assert public == set(OPERATIONS), "a sync operation has no async twin (or the list is stale)"
    for name in OPERATIONS:
        twin = getattr(AsyncMysqlAgentStateStore, name)
        sync_sig = inspect.signature(getattr(MysqlAgentStateStore, name))
        sig = inspect.signature(twin)
        if name == "export":
            assert inspect.isasyncgenfunction(twin), "async export streams: an async iterator, not a list"
            assert sig.replace(return_annotation=sync_sig.return_annotation) == sync_sig
            continue
        assert inspect.iscoroutinefunction(twin), name
        assert sig == sync_sig, f"{name}: {sig} != {sync_sig}"
        for p, q in zip(sig.parameters.values(), sync_sig.parameters.values()):
            assert (p.name, p.kind, p.default, p.annotation) == (q.name, q.kind, q.default, q.annotation), name
        assert sig.return_annotation == sync_sig.return_annotation, name
        # the annotations themselves (typing.get_type_hints), not only the signature inspect shows
        assert typing.get_type_hints(twin) == typing.get_type_hints(getattr(MysqlAgentStateStore, name)), name
        assert twin.__doc__ and ">>>" in twin.__doc__, f"{name} lacks a docstring example"
    from_url = inspect.signature(AsyncMysqlAgentStateStore.from_url).parameters
    assert from_url == inspect.signature(MysqlAgentStateStore.from_url).parameters


def test_a_static_type_checker_sees_each_coroutine_s_parameters_and_result(tmp_path):
    """mypy (a test dependency) reads the generated coroutines as the sync methods' parameters
    with an awaitable of their result: a wrong argument type or keyword is an error, the result
    has the sync method's type (they used to be ``(*args, **kwargs) -> Any``)."""
    use = tmp_path / "use.py"
    use.write_text(
        "from mysql_state import AsyncMysqlAgentStateStore\n"
        "async def main(a: AsyncMysqlAgentStateStore) -> None:\n"
        "    reveal_type(await a.get_list_versioned('u', 's', 'k'))\n"
        "    reveal_type(a.save)\n"
        "    await a.get_list('u', 's', 3)\n"
        "    await a.get_list('u', 's', 'k', ofset=1)\n"
        "    await a.save_list('u', 's', 'k', [1, 2])\n"
    )
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                           "--no-incremental", "--python-version", f"{sys.version_info[0]}.{sys.version_info[1]}",
                           str(use)], capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert 'Revealed type is "tuple[Any, int, fallback=mysql_state.results.VersionedState]"' in out, out
    assert ('Revealed type is "def (user_id: str | None, session_id: str, key: str, value: Any)'
            ' -> typing.Coroutine[Any, Any, None]"') in out, out
    assert 'use.py:5: error: Argument 3 has incompatible type "int"; expected "str"' in out, out
    assert 'use.py:6: error: Unexpected keyword argument "ofset"' in out, out
    assert "Found 2 errors in 1 file" in out, out  # the correct calls type-check


def test_every_documented_store_attribute_reads_the_same_on_the_twin(astore, store):
    """The store's attributes (docs/api.md) are there on the async store too, each the sync
    store's; the list of them covers every public property and attribute of the sync store."""
    from mysql_state.aio import ATTRIBUTES

    properties = {n for n, v in vars(MysqlAgentStateStore).items() if isinstance(v, property) and not n.startswith("_")}
    assert properties - {"stats"} <= set(ATTRIBUTES)  # stats: its own property on the twin
    for name in ATTRIBUTES:
        assert getattr(astore, name) == getattr(astore.sync, name), name
        if name != "pool_size":  # the twin here was opened with pool_size=4, `store` with the default
            assert getattr(astore, name) == getattr(store, name), name
    assert astore.pool_size == 4 and (astore.database_name, astore.table_name) == (store.database_name, "agentscope_sessions")
    assert astore.supports_versioning is True and astore.encryption is None


def test_results_are_of_the_sync_methods_types(astore, store):
    """Each awaited result has the type the sync method returns (awaitable of the same type)."""
    async def go():
        calls = [("save", ("u", "s", "v", 1)), ("save_list_report", ("u", "s", "l", [1, 2])),
                 ("save_many", ("u", "s", {"w": 2})), ("get_versioned", ("u", "s", "v")),
                 ("get_list_versioned", ("u", "s", "l")), ("get_prefix", ("u", "s")),
                 ("list_session_ids", ("u",)), ("sessions", ("u",)), ("metrics", ()),
                 ("save_if_version", ("u", "s", "v", 5, 99))]
        for name, args in calls:
            got = await getattr(astore, name)(*args)
            want = getattr(store, name)(*args)
            assert type(got) is type(want), (name, got, want)

    run(go())


def test_export_is_an_async_iterator_that_streams(astore, store, monkeypatch):
    import mysql_state.aio as aio

    monkeypatch.setattr(aio, "EXPORT_LINES_PER_HOP", 7)  # a module constant, to see several hops
    store.save_list("u", "s", "l", list(range(40)))
    store.save("v", "t", "k", "x")

    async def go():
        stream = astore.export("u")
        assert not isinstance(stream, list) and hasattr(stream, "__anext__")
        first = await stream.__anext__()
        lines = [first] + [line async for line in stream]
        return lines

    lines = run(go())
    assert lines == list(store.export("u")) and len(lines) > 40

    async def early():  # stopping early closes the sync export in its thread
        stream = astore.export()
        got = [await stream.__anext__() for _ in range(3)]
        await stream.aclose()
        return got

    assert run(early()) == list(store.export())[:3]


def test_an_async_export_of_a_damaged_key_warns_at_the_callers_loop(astore, store, raw, monkeypatch):
    """The async export read the sync one in worker threads, so its DamagedExportWarning was
    issued there and pointed at the threading module: a filter on the caller's module missed
    it, and Python's once-per-location default counted every async export of the process as
    one place. It is now issued in the caller's task, at the caller's ``async for`` line, as
    the sync one is at the caller's loop."""
    import warnings

    import mysql_state.aio as aio
    from mysql_state import DamagedExportWarning

    monkeypatch.setattr(aio, "EXPORT_LINES_PER_HOP", 3)  # several hops, the last one short
    store.save_list("u", "s", "l", list(range(8)))
    raw.execute("DELETE FROM {t} WHERE session_id = 'u:s' AND state_key = 'l' AND item_index = 4")

    async def export_all() -> list:
        return [line async for line in astore.export("u")]  # the caller's line

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = run(export_all()), run(export_all())
        sync = list(store.export("u"))
    damaged = [w for w in caught if issubclass(w.category, DamagedExportWarning)][:2]
    assert len(damaged) == 2, [(w.filename, str(w.message)) for w in caught]
    assert {(w.filename, w.lineno) for w in damaged} == {(__file__, export_all.__code__.co_firstlineno + 1)}
    assert [(sid, k) for sid, k, _ in damaged[0].message.keys] == [("u:s", "l")]
    assert first == second == sync and len(first) == 9  # 7 items, the hash row, catalog
    with warnings.catch_warnings():  # a filter on the caller's module acts on it
        warnings.filterwarnings("error", category=DamagedExportWarning, module=__name__)
        with pytest.raises(DamagedExportWarning):
            run(export_all())


def test_operations_give_what_the_sync_store_gives(astore, raw):
    async def go():
        s = astore
        assert not await s.exists("alice", "c1")
        await s.save("alice", "c1", "plan", {"step": 1})
        assert await s.get("alice", "c1", "plan") == {"step": 1}
        assert await s.get("alice", "c1", "nope", default=7) == 7
        assert tuple(await s.get_versioned("alice", "c1", "plan")) == ({"step": 1}, 1)
        assert await s.save_if_version("alice", "c1", "plan", {"step": 2}, 1) == 2
        assert await s.save_if_version("alice", "c1", "plan", {"step": 3}, 1) == UNVERSIONED
        plan = await s.save_list_report("alice", "c1", "memory", ["a", "b"])
        assert (plan.kind, plan.rows_written) == ("rewrite", 2)
        assert await s.append_list("alice", "c1", "memory", ["c"]) == 3
        plan = await s.save_list_report("alice", "c1", "memory", ["a", "b", "c", "d"])
        assert (plan.kind, plan.rows_written) == ("append", 1)
        await s.save_list("alice", "c1", "memory", ["a", "X", "c", "d"])
        assert await s.get_list("alice", "c1", "memory") == ["a", "X", "c", "d"]
        assert await s.get_list("alice", "c1", "memory", offset=-2) == ["c", "d"]
        assert await s.get_list("alice", "c1", "memory", offset=1, limit=2) == ["X", "c"]
        assert await s.list_length("alice", "c1", "memory") == 4
        await s.save("alice", "c2", "x", 1)
        assert await s.list_session_ids("alice") == {"c1", "c2"}
        await s.delete("alice", "c1", "plan")
        assert await s.get("alice", "c1", "plan") is None
        await s.delete("alice", "c2")
        assert await s.list_session_ids("alice") == {"c1"}
        # what the coroutines wrote is what plain SQL sees
        items, h = list_rows(raw, "alice:c1", "memory")
        assert items == ["a", "X", "c", "d"] and h["fmt"] == HASH_FORMAT and h["n"] == 4
        assert await s.truncate_all_sessions() == 5  # 4 items + hash row
        assert raw.rows() == []
        assert s.stats.transactions > 0

    run(go())


def test_errors_are_the_sync_stores_errors(astore, url, database):
    async def go():
        with pytest.raises(ValueError, match="blank"):
            await astore.save("alice", "  ", "k", 1)
        with pytest.raises(TypeError, match="cannot serialise"):
            await astore.save_list("alice", "c", "k", [object()])
        with pytest.raises(TypeError, match="expected_version"):
            await astore.save_if_version("alice", "c", "k", 1, "1")
        with pytest.raises(ValueError, match="limit"):
            await astore.get_list("alice", "c", "k", limit=-1)

    run(go())
    with pytest.raises(SchemaNotFoundError):
        AsyncMysqlAgentStateStore.from_url(url, database_name=database + "_missing")


# ---- the loop is never blocked -------------------------------------------------------------------


def _max_tick_gap(work, interval: float = 0.005) -> tuple[float, int, float]:
    """Run ``work()`` beside a coroutine ticking every ``interval``; (max gap, ticks, seconds).
    The garbage collector is off meanwhile: in a long test run a full collection of the
    process's objects stalls every thread for ~0.2 s (a stall of 249 ms failed one full run),
    which says nothing about the store."""
    import gc

    gc.collect()
    gc.disable()
    try:
        return _tick_gap(work, interval)
    finally:
        gc.enable()


def _tick_gap(work, interval: float) -> tuple[float, int, float]:

    async def go():
        stamps: list[float] = []
        done = asyncio.Event()

        async def ticker():
            while not done.is_set():
                stamps.append(time.perf_counter())
                await asyncio.sleep(interval)

        t = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        start = time.perf_counter()
        await work()
        elapsed = time.perf_counter() - start
        await asyncio.sleep(3 * interval)  # one tick after the work, to close the last gap
        done.set()
        await t
        during = [start] + [s for s in stamps if s > start]
        gaps = [b - a for a, b in zip(during, during[1:])]
        return max(gaps), len(during), elapsed

    return run(go())


def test_a_ticking_coroutine_keeps_ticking_beside_a_burst_of_saves(url, database, raw):
    big = [{"role": "user", "text": "x" * 2000, "i": i} for i in range(300)]
    sync = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=4)
    astore = AsyncMysqlAgentStateStore(sync, max_workers=4)

    async def burst():
        await asyncio.gather(*(astore.save_list("u", f"s{i}", "memory", big) for i in range(40)))

    async def blocking_burst():  # the control: the same work called on the loop's thread
        for i in range(40):
            sync.save_list("u", f"b{i}", "memory", big)

    try:
        gap, ticks, elapsed = _max_tick_gap(burst)
        assert elapsed > 0.2, "the burst is too small to show anything"
        # liveness only: the loop keeps running (the side-by-side stall check below is the real one)
        assert ticks >= max(20, elapsed / 0.005 * 0.1), (ticks, elapsed)
        blocked_gap, _, blocked_elapsed = _max_tick_gap(blocking_burst)
        assert blocked_gap > 0.8 * blocked_elapsed, "the control should have frozen the ticker"
        # Side by side in one run (the machine is shared and noisy): the async burst's longest
        # stall is a small fraction of the control's, and never long in absolute terms.
        assert gap < 0.25 * blocked_gap and gap < 0.25, (
            f"the loop stalled {gap * 1000:.0f} ms during the async burst "
            f"(the blocking control: {blocked_gap * 1000:.0f} ms)")
    finally:
        run(astore.aclose())
    for i in range(40):  # and the burst really wrote everything
        items, h = list_rows(raw, f"u:s{i}", "memory")
        assert h["n"] == 300 and items == big


def test_threads_are_bounded_by_max_workers(url, database):
    sync = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=3)
    astore = AsyncMysqlAgentStateStore(sync, max_workers=3)
    seen: set[str] = set()

    async def go():
        async def watch():
            while True:
                seen.update(t.name for t in threading.enumerate() if t.name.startswith("mysql-state"))
                await asyncio.sleep(0.002)

        w = asyncio.create_task(watch())
        await asyncio.gather(*(astore.save_list("u", f"s{i}", "m", list(range(500))) for i in range(30)))
        w.cancel()
        await astore.aclose()

    run(go())
    assert 1 <= len(seen) <= 3, seen


# ---- cancellation --------------------------------------------------------------------------------


def test_cancelling_a_burst_leaves_whole_lists_and_a_usable_pool(url, database, raw):
    """Cancel 60 saves mid-flight: each list is absent or complete, never partial; the
    started ones still finish; afterwards the pool serves 3x its size at once."""
    size = 4
    sync = MysqlAgentStateStore.from_url(
        url, database_name=database, create_if_not_exist=True, pool_size=size, pool_timeout=2.0
    )
    astore = AsyncMysqlAgentStateStore(sync)
    lists = {f"s{i}": [{"i": i, "j": j, "pad": "p" * 500} for j in range(400)] for i in range(60)}

    async def go():
        tasks = [asyncio.create_task(astore.save_list("u", sid, "memory", v)) for sid, v in lists.items()]
        await asyncio.sleep(0.15)
        running = sum(not t.done() for t in tasks)
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
        assert running > size and cancelled > 0, (running, cancelled)
        await astore.aclose()  # waits for threads that had started
        return cancelled

    run(go())
    complete = absent = 0
    for sid, v in lists.items():
        items, h = list_rows(raw, f"u:{sid}", "memory")
        if h is None:
            assert items == [], f"{sid}: item rows without a hash row"
            absent += 1
        else:
            assert h["n"] == len(v) and items == v, f"{sid}: a half-written list"
            complete += 1
    assert absent > 0, "nothing was cancelled before it started"
    assert complete > 0, "no started save finished"

    # The pool is whole: 3x its size of concurrent saves, none waiting past pool_timeout.
    again = AsyncMysqlAgentStateStore.from_url(
        url, database_name=database, pool_size=size, pool_timeout=2.0
    )

    async def after():
        await asyncio.gather(*(again.save("u", f"after{i}", "k", i) for i in range(3 * size)))
        await again.aclose()

    run(after())


def test_cancelled_rewrite_is_old_or_new_never_mixed(astore, raw):
    old = [{"v": "old", "j": j, "pad": "o" * 300} for j in range(500)]
    new = [{"v": "new", "j": j, "pad": "n" * 300} for j in range(500)]

    async def go():
        await astore.save_list("u", "s", "memory", old)
        outcomes = []
        for delay in (0, 0.001, 0.005, 0.02, 0.05):
            await astore.save_list("u", "s", "memory", old)
            writer = AsyncMysqlAgentStateStore(astore.sync, close_store=False)  # its own worker threads
            t = asyncio.create_task(writer.save_list("u", "s", "memory", new))
            await asyncio.sleep(delay)
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass
            await writer.aclose()  # waits for the cancelled save if its thread had started it
            items, h = list_rows(raw, "u:s", "memory")
            assert items in (old, new) and h["n"] == 500
            outcomes.append(items[0]["v"])
            assert await astore.get_list("u", "s", "memory") == items  # the snapshot agrees
        return outcomes

    outcomes = run(go())
    assert "old" in outcomes or "new" in outcomes


def test_a_cancelled_write_never_lands_after_the_callers_next_write(astore, raw):
    """The cancellation reached the caller while the write went on in its thread, so the
    caller's next write could land first and be overwritten by the cancelled one (an adapter's
    clear after a cancelled add kept the items; a newer AgentScope state lost to an older)."""
    big = [{"v": "cancelled", "j": j, "pad": "c" * 400} for j in range(3000)]

    async def go() -> list:
        outcomes = []
        for delay in (0.002, 0.005, 0.01, 0.02, 0.04):
            t = asyncio.create_task(astore.save_list("u", "s", f"m{delay}", big))
            await asyncio.sleep(delay)
            t.cancel()
            try:
                await t
                outcomes.append("finished")
            except asyncio.CancelledError:
                outcomes.append("cancelled")
            await astore.save_list("u", "s", f"m{delay}", ["after"])  # the caller's next write
            time.sleep(0.3)  # a write still going on in a thread would land meanwhile
            assert list_rows(raw, "u:s", f"m{delay}")[0] == ["after"], delay
        return outcomes

    assert "cancelled" in run(go())


def test_pool_semaphores_are_all_released_after_cancellation(url, database):
    size = 3
    astore = AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=size)
    limits = list(astore.sync._db._limits.values())

    async def go():
        tasks = [asyncio.create_task(astore.save_list("u", f"s{i}", "m", list(range(2000)))) for i in range(20)]
        await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(astore._executor.shutdown, True)  # let started threads finish

    run(go())
    # every permit is back: a bounded semaphore acquires exactly `size` times without waiting
    for sem in limits:
        got = [sem.acquire(timeout=0) for _ in range(size)]
        assert all(got) and not sem.acquire(timeout=0)
        for _ in range(size):
            sem.release()
    run(astore.aclose())


# ---- lifecycle -----------------------------------------------------------------------------------


def test_async_with_waits_for_running_work_then_closes(url, database, raw):
    payload = [{"j": j, "pad": "z" * 400} for j in range(800)]

    async def go():
        async with AsyncMysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True) as s:
            t = asyncio.create_task(s.save_list("u", "s", "memory", payload))
            await asyncio.sleep(0.01)
            t.cancel()
        with pytest.raises(StoreClosedError, match="closed"):  # issue 18 item 23: the typed error
            await s.get("u", "s", "k")
        with pytest.raises(StoreClosedError):
            async for _ in s.export():
                pass
        with pytest.raises(StoreClosedError):
            async with s.session_lock("u", "s"):
                pass
        await s.aclose()  # idempotent

    run(go())
    items, h = list_rows(raw, "u:s", "memory")
    assert (h is None and items == []) or (h["n"] == 800 and items == payload)


def test_wrapping_a_store_and_leaving_it_open(store, raw):
    async def go():
        a = AsyncMysqlAgentStateStore(store, close_store=False)
        await a.save("u", "s", "k", {"a": 1})
        await a.aclose()

    run(go())
    assert store.get("u", "s", "k") == {"a": 1}  # the sync store still works
    assert [r[:4] for r in raw.rows()] == [("u:s", "k", 0, '{"a":1}')]
    with pytest.raises(TypeError):
        AsyncMysqlAgentStateStore("mysql://nope")  # type: ignore[arg-type]


def test_open_connects_without_blocking_the_loop(url, database):
    async def go():
        s = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True)
        await s.save(None, "anon", "k", 1)
        assert await s.list_session_ids(None) == {"anon"}
        await s.aclose()

    run(go())


# ---- cancellation of what aio.py runs itself, and its own arguments ----------------------------


def test_a_cancelled_session_lock_acquire_gives_the_lock_back(astore, store, raw):
    """Cancelled while another run holds the lock, the acquire goes on waiting in its thread;
    once the holder lets go, the lock it takes is released at once, for nobody holds it: the
    next run gets it (the lock was kept until garbage collection before)."""
    holder = store.session_lock("alice", "async-cancel-lock", timeout=5)
    holder.acquire()
    name = holder.name

    async def cancelled():
        waiting = astore.session_lock("alice", "async-cancel-lock", timeout=10)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiting.__aenter__(), 0.5)
        return waiting  # kept referenced: the lock must not depend on garbage collection

    async def main():
        kept = await cancelled()
        holder.release()  # the abandoned acquire takes it now, and must give it back
        deadline = time.monotonic() + 5
        while raw.query("SELECT IS_USED_LOCK(%s)", (name,))[0][0] is not None or \
                time.monotonic() - deadline < -4.5:  # at least half a second for the acquire to run
            assert time.monotonic() < deadline, "the abandoned acquire kept the lock"
            await asyncio.sleep(0.05)
        async with astore.session_lock("alice", "async-cancel-lock", timeout=2):  # free for the next run
            await astore.save("alice", "async-cancel-lock", "turn", 1)
        return kept

    run(main())
    assert store.get("alice", "async-cancel-lock", "turn") == 1
    assert raw.query("SELECT IS_USED_LOCK(%s)", (name,))[0][0] is None


def test_a_cancelled_export_raises_the_cancellation_and_closes_the_export(astore, store, monkeypatch):
    """The consumer cancelled while a hop reads the export in a thread: the cancellation is
    what it sees (not "generator already executing" from closing the export under that
    thread), and the store goes on serving exports."""
    import mysql_state.aio as aio

    monkeypatch.setattr(aio, "EXPORT_LINES_PER_HOP", 50)
    store.save_list("u", "big-export", "l", list(range(3000)))

    seen = [0]

    async def consume():
        lines = []
        async for line in astore.export("u", ["big-export"]):
            lines.append(line)
            seen[0] += 1
        return lines

    for after in (1, 120, 1000, 2900):  # the task waits only on hops: cancelled, it is in one
        async def main():
            seen[0] = 0
            task = asyncio.ensure_future(consume())
            while seen[0] < after:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await consume()

        assert len(run(main())) == len(list(store.export("u", ["big-export"]))), after


def test_the_twins_own_arguments_are_checked(store):
    for bad, error in ((0, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError), ("3", TypeError)):
        with pytest.raises(error, match=r"max_workers must be a positive int or None"):
            AsyncMysqlAgentStateStore(store, max_workers=bad)
    with pytest.raises(TypeError, match=r"close_store must be a bool, got str: 'no'"):
        AsyncMysqlAgentStateStore(store, close_store="no")
    twin = AsyncMysqlAgentStateStore(store, max_workers=2, close_store=False)
    assert twin.max_workers == 2
    run(twin.aclose())
    assert store.exists("u", "nothing-here") is False  # close_store=False: the store is open


def test_an_async_def_given_as_a_callback_is_refused_before_anything_runs(astore, store, raw):
    """``transaction(fn)`` and ``progress=`` call a plain function (in a worker thread for the
    async store): an ``async def`` would give a coroutine nothing awaits, its writes never made."""
    async def move(tx):
        tx.save("u", "async-fn", "k", 1)

    async def progress(*done):
        pass

    before = raw.com_counts()
    with pytest.raises(TypeError, match=r"fn must be a plain function taking its arguments; move is an async def"):
        run(astore.transaction(move))
    with pytest.raises(TypeError, match=r"fn must be a plain function"):
        store.transaction(move)
    with pytest.raises(TypeError, match=r"progress must be a plain function"):
        run(astore.prune(datetime.timedelta(days=1), progress=progress))
    with pytest.raises(TypeError, match=r"progress must be a plain function"):
        store.import_rows([], progress=progress)
    with pytest.raises(TypeError, match=r"progress must be a callable, got int: 5"):
        store.prune(datetime.timedelta(days=1), progress=5)
    for call in (astore.doctor(progress=progress), astore.forget_user("u", progress=progress),
                 astore.migrate(progress=progress)):
        with pytest.raises(TypeError, match=r"progress must be a plain function"):
            run(call)
    with pytest.raises(TypeError, match=r"progress must be a callable, got int: 5"):
        store.doctor(True, progress=5)
    with pytest.raises(TypeError, match=r"dry_run must be a bool, got str: 'no'"):
        store.prune(datetime.timedelta(days=1), dry_run="no")
    assert raw.com_counts() == before  # refused before any statement
    assert not store.exists("u", "async-fn")


def test_the_long_operations_take_progress_and_call_it_in_the_worker_thread(url, database, astore, store, raw):
    """``reencrypt``, ``doctor``, ``forget_user`` and ``migrate`` take ``progress=`` as the sync
    store does (``prune`` and ``import_rows`` too); the callback runs in the worker thread that
    runs the call, never on the event loop's thread."""
    pytest.importorskip("cryptography", reason="encryption needs the encryption extra (make test installs it)")
    import os

    from mysql_state import Keyring

    for i in range(3):
        store.save_list("u", f"s{i}", "m", [1, 2])
    seen: list = []

    def progress(done, total):
        seen.append((threading.current_thread() is threading.main_thread(), done, total))

    assert run(astore.doctor(progress=progress)) == [] and seen == [(False, 0, None), (False, 3, None)]
    seen.clear()
    k1 = os.urandom(32)
    sealed = MysqlAgentStateStore.from_url(url, database_name=database, encryption=Keyring({"k1": k1}, current="k1"))
    twin = AsyncMysqlAgentStateStore(sealed, close_store=True)
    try:
        assert run(twin.reencrypt(batch=2, progress=progress)) == 9  # 3 lists: a hash row and 2 items each
        assert seen == [(False, 0, None), (False, 6, None), (False, 9, None), (False, 9, None)]
    finally:
        run(twin.aclose())
    seen.clear()
    assert run(astore.forget_user("u", batch=2, progress=progress)) == 12 and raw.rows() == []
    assert seen == [(False, 0, 3), (False, 2, 3), (False, 3, 3)]
    seen.clear()
    raw.execute("INSERT INTO {t} (session_id, state_key, item_index, state_data, version)"
                " VALUES ('j:x', 'k', 0, '1', 0)")  # as the Java store writes: version 0, no catalog row
    assert [s.name for s in run(astore.migrate(progress=progress))] == ["0002_version_column", "0004_session_catalog"]
    assert seen == [(False, 0, None), (False, 1, None), (False, 2, None)]  # the row given a version, its catalog row


# ---- the async lease: its waits and releases never wait in the store's worker queue ---------


def _lock_is_free(url: str, database: str) -> bool:
    other = MysqlAgentStateStore.from_url(url, database_name=database)
    try:
        with other.session_lock("u", "s", timeout=2):
            return True
    except Exception:  # noqa: BLE001 - LockTimeoutError: still held
        return False
    finally:
        other.close()


@pytest.mark.parametrize("timeout", [4, None])
def test_tasks_taking_turns_on_a_lease_never_starve_its_holder(url, database, raw, timeout):
    """Waiters ran GET_LOCK in the store's worker threads: with pool_size=2, two waiters took
    both, and the holder's own calls inside its block waited behind them (timeouts, or with
    timeout=None a deadlock). The waits run in threads of their own."""
    async def go() -> float:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=2)

        async def turn(i: int) -> None:
            async with astore.session_lock("u", "s", timeout=timeout):
                await astore.append_list("u", "s", "m", [i])
                await asyncio.sleep(0.05)

        t0 = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.gather(*(turn(i) for i in range(3))), 20)
        finally:
            await astore.aclose()
        return time.monotonic() - t0

    assert run(go()) < 4
    assert sorted(orjson.loads(r[0]) for r in raw.query(
        "SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'm'")) == [0, 1, 2]


def test_a_cancelled_lease_wait_ends_its_thread_and_aclose_does_not_hang(url, database, store):
    """A cancelled `async with session_lock` kept waiting in its thread (GET_LOCK slices of 5 s,
    forever with timeout=None), and aclose() waited for it."""
    async def go() -> float:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=1)
        with store.session_lock("u", "s", timeout=5):  # held by another store

            async def waiter() -> None:
                async with astore.session_lock("u", "s", timeout=None):
                    pass

            task = asyncio.create_task(waiter())
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            t0 = time.monotonic()
            await astore.aclose()
            return time.monotonic() - t0

    assert run(go()) < 2.5
    assert _lock_is_free(url, database)


def test_a_closed_twin_answers_as_the_closed_sync_store_does(url, database):
    """Closed, the sync store still checks arguments first (a ValueError naming the value) and
    still reports its metrics; the twin, closed with it, raised StoreClosedError for all: the
    same call, another error. With close_store=False the sync store stays open, and the
    closed twin refuses every call."""
    calls = [("metrics", ()), ("get", ("u", "s", "")), ("save", ("u", "s", "k:_hash", 1)),
             ("get", ("u", "s", "k")), ("save_list", ("u", "s", "m", [1]))]

    def outcome(fn, *args):
        try:
            return "ok", type(fn(*args)).__name__
        except Exception as exc:  # noqa: BLE001 - compared
            return type(exc).__name__, str(exc)

    async def go():
        sync = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True)
        sync.close()
        twin = AsyncMysqlAgentStateStore.from_url(url, database_name=database)
        await twin.aclose()
        for name, args in calls:
            async def call(*a, name=name):
                return await getattr(twin, name)(*a)
            got = outcome(getattr(sync, name), *args)
            try:
                mine = "ok", type(await call(*args)).__name__
            except Exception as exc:  # noqa: BLE001 - compared
                mine = type(exc).__name__, str(exc)
            assert mine == got, (name, args)
        assert outcome(sync.get, "u", "s", "")[0] == "ValueError" and outcome(sync.get, "u", "s", "k")[0] == (
            "StoreClosedError")
        kept = MysqlAgentStateStore.from_url(url, database_name=database)
        alone = AsyncMysqlAgentStateStore(kept, close_store=False)
        await alone.aclose()
        for name, args in calls:
            with pytest.raises(StoreClosedError, match="aclose was called"):
                await getattr(alone, name)(*args)
        assert kept.exists("u", "nothing-here") is False  # still open: the twin's close left it
        kept.close()

    run(go())


def test_a_lease_left_by_a_cancelled_task_or_after_aclose_is_released(url, database, store):
    """The release at the block's end went through the store's worker queue: a task cancelled
    while it was queued dropped it, and after aclose() it raised StoreClosedError; either way
    the lock stayed held."""
    async def cancelled_at_the_end() -> None:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=1)
        holder: dict = {}

        async def worker() -> None:
            async with astore.session_lock("u", "s", timeout=5):
                holder["busy"] = asyncio.create_task(astore.transaction(lambda tx: time.sleep(1.0)))
                await asyncio.sleep(0.05)  # the only worker thread is now busy

        task = asyncio.create_task(worker())
        await asyncio.sleep(0.3)  # in __aexit__
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await holder["busy"]
        await astore.aclose()

    async def closed_inside() -> None:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=2)
        closing = asyncio.Event()

        async def worker() -> None:
            async with astore.session_lock("u", "s", timeout=5):
                await closing.wait()

        task = asyncio.create_task(worker())
        await asyncio.sleep(0.3)
        await astore.aclose()
        closing.set()
        await task

    run(cancelled_at_the_end())
    assert _lock_is_free(url, database)
    run(closed_inside())
    assert _lock_is_free(url, database)


def test_a_lease_wait_longer_than_the_read_timeout_is_a_lock_timeout(url, database, store):
    """GET_LOCK waited in slices of 5 s: with read_timeout=2 the driver gave up first and the
    wait failed as a lost connection (ServerUnavailableError). The slices stay under it."""
    from mysql_state import LockTimeoutError

    with store.session_lock("u", "s", timeout=10):
        short = MysqlAgentStateStore.from_url(url, database_name=database, read_timeout=2)
        try:
            t0 = time.monotonic()
            with pytest.raises(LockTimeoutError):
                with short.session_lock("u", "s", timeout=3):
                    pass
            assert 2.5 < time.monotonic() - t0 < 6
        finally:
            short.close()


def test_a_second_aclose_returns_once_the_store_is_closed(url, database):
    """A second aclose() while the first was closing returned at once, the store still open."""
    from mysql_state.errors import StoreClosedError as Closed

    async def go() -> None:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=1)
        busy = asyncio.create_task(astore.transaction(lambda tx: time.sleep(0.5)))
        await asyncio.sleep(0.1)
        first = asyncio.create_task(astore.aclose())
        await asyncio.sleep(0.05)
        await astore.aclose()  # the second: returns when the store is closed
        with pytest.raises(Closed):
            astore.sync.exists("u", "s")
        await first
        await busy

    run(go())


def test_aclose_gives_up_a_waiting_session_lock_and_hands_out_no_lock(url, database, store):
    """A task waiting in `async with astore.session_lock(...)` (timeout=None) when aclose() ran
    took the lock later on the closed store and entered its block (found by an async audit):
    now the wait ends with StoreClosedError within the watched slice, and no lock is left."""
    entered: list = []

    async def main() -> float:
        astore = await AsyncMysqlAgentStateStore.open(url, database_name=database, create_if_not_exist=True,
                                                      pool_size=2)

        async def waiter() -> None:
            async with astore.session_lock("u", "s", timeout=None):
                entered.append(True)

        with store.session_lock("u", "s", timeout=5):  # held elsewhere: the task waits
            task = asyncio.create_task(waiter())
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            await astore.aclose()
            with pytest.raises(StoreClosedError, match="while the session lock was awaited"):
                await task
            return time.monotonic() - t0

    took = run(main())
    assert entered == [] and took < 3
    assert _lock_is_free(url, database)


def test_an_export_read_while_the_store_closes_stops_with_store_closed(url, database, store):
    """With close_store=True an export being read went on after aclose(), its statements run on
    the event loop's thread (a closed twin runs the closed sync store's method there); with
    close_store=False it stopped. Both stop now, at the next chunk."""
    store.save_list("u", "big", "m", list(range(2500)))

    async def main(close_store: bool) -> int:
        astore = AsyncMysqlAgentStateStore(MysqlAgentStateStore.from_url(url, database_name=database)
                                           if close_store else store, close_store=close_store)
        seen = 0
        with pytest.raises(StoreClosedError, match="while the export was read"):
            async for _ in astore.export("u", ["big"]):
                seen += 1
                if seen == 10:
                    await astore.aclose()
        return seen

    for close_store in (True, False):
        assert run(main(close_store)) == 1000  # the chunk read before the close, no more


def test_a_queued_call_waits_for_a_thread_and_the_callers_timeout_drops_it_unrun(url, database, raw):
    """The async store runs max_workers calls at once and queues the others, without a bound of
    its own (a burst is served in turn, never refused: the OpenAI sessions' case). The caller's
    asyncio.wait_for bounds the wait: a call still queued when it times out is dropped and never
    runs, even once the thread is free. metrics() reads memory only: it answers at once."""
    sync = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, pool_size=1,
                                         pool_timeout=1.0)
    astore = AsyncMysqlAgentStateStore(sync)

    def slow(tx):
        tx.save("u", "s", "held", 1)
        time.sleep(3)

    async def go():
        holding = asyncio.create_task(astore.transaction(slow))
        await asyncio.sleep(0.3)  # the one thread is in the transaction
        t0 = time.monotonic()
        assert (await astore.metrics())["writes"] >= 1  # on the loop, not behind the transaction
        assert time.monotonic() - t0 < 0.5
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(astore.save("u", "s", "dropped", 1), 1.0)
        waited = time.monotonic() - t0
        queued = asyncio.create_task(astore.save("u", "s", "queued", 1))  # past pool_timeout: still served
        await holding
        await queued
        await astore.aclose()
        return waited

    waited = run(go())
    assert 0.9 < waited < 2.5, waited
    assert [r[1] for r in raw.rows("u:s")] == ["held", "queued"]  # the dropped save never ran
