"""transaction(fn) used wrongly fails at once; session_lock leases never starve the work they
protect, and a lease whose connection dies says so (issue 18, items 18 and 19). Real server."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest

from mysql_state import LockLostError, MysqlAgentStateStore, NestedTransactionError, PoolTimeoutError
from mysql_state.pool import parse_url

from .conftest import connect

#: Without the guard, a write inside fn waits for the transaction's own locks: a short lock
#: wait and no retries make that a ConflictError in about 3 s, not a hang of 9 x 50 s.
LOCK_WAIT = 3
FAST = 1.0  # well under the lock wait


@pytest.fixture
def short_wait(url, database, store):
    s = MysqlAgentStateStore.from_url(url, database, retries=0,
                                      init_command=f"SET SESSION innodb_lock_wait_timeout={LOCK_WAIT}")
    yield s
    s.close()


def _refused_fast(store, fn) -> NestedTransactionError:
    t0 = time.monotonic()
    with pytest.raises(NestedTransactionError) as info:
        store.transaction(fn)
    assert time.monotonic() - t0 < FAST
    return info.value


# ---- 18: a write through the store inside fn ---------------------------------------------------


def test_store_write_inside_fn_after_a_tx_write_fails_fast_and_writes_nothing(short_wait, raw):
    def fn(tx):
        tx.save("alice", "chat-1", "a", 1)  # the transaction now locks the session's catalog row
        short_wait.save("alice", "chat-1", "b", 2)

    err = _refused_fast(short_wait, fn)
    assert "tx.save" in str(err) and "nothing was written" in str(err)
    assert raw.all_rows() == []


def test_store_write_inside_fn_before_any_tx_write_is_refused_too(short_wait, raw):
    """No lock held yet: the write would commit on its own, outside the transaction, and stay
    when fn then fails. It is refused like the one that would deadlock."""
    def fn(tx):
        short_wait.save_list("alice", "chat-1", "memory", [1, 2])
        tx.save("alice", "chat-1", "a", 1)

    _refused_fast(short_wait, fn)
    assert raw.all_rows() == []


@pytest.mark.parametrize("write", ["delete", "append_list", "append_lists", "save_many", "pop_list", "transaction"])
def test_every_store_write_and_a_nested_transaction_inside_fn_fail_fast(short_wait, raw, write):
    short_wait.save("alice", "chat-1", "a", 0)
    before = raw.all_rows()
    calls = {
        "delete": lambda: short_wait.delete("alice", "chat-1"),
        "append_list": lambda: short_wait.append_list("alice", "chat-1", "memory", [1]),
        "append_lists": lambda: short_wait.append_lists("alice", "chat-1", {"memory": [1]}, values={"b": 1}),
        "save_many": lambda: short_wait.save_many("alice", "chat-1", values={"b": 1}),
        "pop_list": lambda: short_wait.pop_list("alice", "chat-1", "memory"),
        "transaction": lambda: short_wait.transaction(lambda inner: inner.save("alice", "chat-1", "b", 2)),
    }

    def fn(tx):
        tx.save("alice", "chat-1", "a", 1)
        calls[write]()

    _refused_fast(short_wait, fn)
    assert raw.all_rows() == before  # the outer transaction rolled back too


def test_reads_through_the_store_inside_fn_see_committed_state(store, raw):
    store.save("alice", "chat-1", "n", 1)

    def fn(tx):
        tx.save("alice", "chat-1", "n", 2)
        return store.get("alice", "chat-1", "n"), store.exists("alice", "chat-1"), tx.get("alice", "chat-1", "n")

    assert store.transaction(fn) == (1, True, 2)  # the store reads what is committed, tx its own
    assert store.get("alice", "chat-1", "n") == 2
    # After the transaction, and from another thread during one, writes are writes again.
    store.save("alice", "chat-1", "n", 3)
    other = []

    def slow(tx):
        tx.save("alice", "chat-1", "n", 4)
        t = threading.Thread(target=lambda: other.append(store.save("bob", "chat-1", "n", 1)))
        t.start()
        t.join(10)
        return len(other)

    assert store.transaction(slow) == 1 and store.get("bob", "chat-1", "n") == 1


async def _async_nested(astore):
    def fn(tx):
        tx.save("alice", "chat-1", "a", 1)
        astore.sync.save("alice", "chat-1", "b", 2)

    await astore.transaction(fn)


def test_the_async_store_refuses_it_too(url, database, short_wait, raw):
    import asyncio

    from mysql_state import AsyncMysqlAgentStateStore

    async def main():
        astore = AsyncMysqlAgentStateStore(short_wait)
        t0 = time.monotonic()
        with pytest.raises(NestedTransactionError):
            await _async_nested(astore)
        return time.monotonic() - t0

    assert asyncio.run(main()) < FAST
    assert raw.all_rows() == []


# ---- 19: leases and the pool ---------------------------------------------------------------------


@pytest.fixture
def small(url, database, store):
    s = MysqlAgentStateStore.from_url(url, database, pool_size=2, pool_timeout=2)
    yield s
    s.close()


def test_pool_size_leases_and_the_reads_inside_them_all_succeed(small, raw):
    small.save_list("alice", "chat-1", "memory", [1, 2, 3])
    with contextlib.ExitStack() as stack:
        for s in ("chat-1", "chat-2"):  # as many leases as the pool has connections
            stack.enter_context(small.session_lock("alice", s, timeout=5))
        assert small.get_list("alice", "chat-1", "memory") == [1, 2, 3]
        assert small.exists("alice", "chat-1")
        small.save("alice", "chat-2", "k", {"v": 1})
        assert small.get("alice", "chat-2", "k") == {"v": 1}
    assert raw.rows("alice:chat-2")[0][3] == '{"v":1}'


def test_leases_in_as_many_threads_as_connections_do_their_work(small):
    errors, done = [], []

    def worker(i: int) -> None:
        try:
            with small.session_lock("alice", f"chat-{i}", timeout=5):
                for n in range(5):
                    small.append_list("alice", f"chat-{i}", "memory", [n])
                    small.get_list("alice", f"chat-{i}", "memory")
                    time.sleep(0.01)
            done.append(i)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]  # twice pool_size
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and sorted(done) == [0, 1, 2, 3]
    assert all(small.get_list("alice", f"chat-{i}", "memory") == [0, 1, 2, 3, 4] for i in range(4))
    assert not any(isinstance(e, PoolTimeoutError) for e in errors)


def _kill_holder(url: str, name: str) -> None:
    """KILL the server thread holding lock ``name`` (plain SQL, another connection), and wait
    until the server has released the lock."""
    con = connect(url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT IS_USED_LOCK(%s)", (name,))
            holder = cur.fetchone()[0]
            assert holder is not None
            cur.execute(f"KILL {int(holder)}")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                cur.execute("SELECT IS_USED_LOCK(%s)", (name,))
                if cur.fetchone()[0] is None:
                    return
                time.sleep(0.02)
            raise AssertionError("the killed holder still holds the lock")
    finally:
        con.close()


def test_a_lease_whose_connection_is_killed_fails_the_next_store_call(store, other_store, url, raw):
    store.save("alice", "chat-1", "n", 1)
    with pytest.raises(LockLostError):
        with store.session_lock("alice", "chat-1", timeout=5) as lock:
            assert store.get("alice", "chat-1", "n") == 1
            lock.check()
            _kill_holder(url, lock.name)
            with other_store.session_lock("alice", "chat-1", timeout=2):  # another run may take it now
                pass
            with pytest.raises(LockLostError):
                store.get("alice", "chat-1", "n")  # a read
            with pytest.raises(LockLostError):
                store.save("alice", "chat-1", "n", 2)  # a write: refused before any SQL
            lock.check()  # and check() says so (the raise leaves the block)
    assert store.get("alice", "chat-1", "n") == 1 and raw.rows("alice:chat-1")[0][3] == "1"
    # Outside the lease the store works, and the session can be locked again.
    with store.session_lock("alice", "chat-1", timeout=2):
        store.save("alice", "chat-1", "n", 3)
    assert store.get("alice", "chat-1", "n") == 3


def test_an_async_lease_whose_connection_is_killed_fails_the_tasks_next_store_call(store, url, raw):
    """The async lease is watched in the task: its next store call raises LockLostError, nothing
    is written, and a healthy async lease ends quietly."""
    import asyncio

    from mysql_state.aio import AsyncMysqlAgentStateStore

    store.save("alice", "chat-1", "n", 1)
    astore = AsyncMysqlAgentStateStore(store, close_store=False)

    async def run():
        with pytest.raises(LockLostError):
            async with astore.session_lock("alice", "chat-1", timeout=5) as lease:
                assert await astore.get("alice", "chat-1", "n") == 1
                await lease.check()
                _kill_holder(url, lease.name)
                with pytest.raises(LockLostError):
                    await astore.save("alice", "chat-1", "n", 2)
                await lease.check()
        async with astore.session_lock("alice", "chat-1", timeout=5):
            await astore.save("alice", "chat-1", "n", 3)
        await astore.aclose()

    asyncio.run(run())
    assert [r[3] for r in raw.rows("alice:chat-1") if r[1] == "n"] == ["3"]


def test_a_lease_lost_without_a_store_call_raises_at_the_end_of_the_block(store, url):
    with pytest.raises(LockLostError):
        with store.session_lock("alice", "chat-1", timeout=5) as lock:
            _kill_holder(url, lock.name)
    with store.session_lock("alice", "chat-1", timeout=5) as lock:  # a healthy lease ends quietly
        lock.check()
    assert not lock.held


def test_a_body_error_is_not_masked_by_the_lost_lease(store, url):
    with pytest.raises(KeyError):
        with store.session_lock("alice", "chat-1", timeout=5) as lock:
            _kill_holder(url, lock.name)
            raise KeyError("the body's own error")


def test_no_secret_in_a_lease_repr_or_its_errors(url, database, store):
    password = "pw-" + uuid.uuid4().hex
    user = "lease_" + uuid.uuid4().hex[:8]
    kwargs, _ = parse_url(url)
    con = connect(url)
    with con.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cur.execute(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT ALL ON `{database}`.* TO '{user}'@'%'")
        cur.execute(f"GRANT ALL ON `{database}`.* TO '{user}'@'localhost'")
    host = kwargs.get("host", "127.0.0.1")
    port = kwargs.get("port", 3306)
    sock = kwargs.get("unix_socket")
    secret_url = f"mysql://{user}:{password}@{host}:{port}/{database}" + (f"?unix_socket={sock}" if sock else "")
    try:
        with MysqlAgentStateStore.from_url(secret_url) as s:
            lock = s.session_lock("alice", "chat-1", timeout=5)
            texts = [repr(lock), repr(s)]
            with pytest.raises(LockLostError) as info:
                with lock:
                    texts.append(repr(lock))
                    _kill_holder(url, lock.name)
                    s.get("alice", "chat-1", "n")
            texts += [str(info.value), repr(info.value), repr(lock)]
        assert all(password not in t for t in texts), texts
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
            cur.execute(f"DROP USER IF EXISTS '{user}'@'localhost'")
        con.close()


@pytest.fixture
def other_store(url, database, store):
    s = MysqlAgentStateStore.from_url(url, database)
    yield s
    s.close()


def test_a_transactions_reads_check_their_type_as_the_stores_do(store):
    """tx.get(..., "int") handed back the stored value unchecked where store.get refuses the
    type (audit of 2026-12-07)."""
    store.save("u", "s", "k", "7")
    store.save_list("u", "s", "l", [1])
    for bad in ("int", 5):
        with pytest.raises(TypeError, match="type must be a class"):
            store.transaction(lambda tx: tx.get("u", "s", "k", bad))
        with pytest.raises(TypeError, match="type must be a class"):
            store.transaction(lambda tx: tx.get_list("u", "s", "l", bad))
    assert store.transaction(lambda tx: tx.get("u", "s", "k", str)) == "7"


@pytest.mark.parametrize("write", ["append_list", "save"])
def test_a_row_lock_held_longer_than_read_timeout_is_a_retried_lock_wait_not_a_lost_connection(url, database, write):
    """A write waiting on another transaction's row lock longer than the store's read_timeout
    got the driver's timeout (2013): CommitUnknownError or ServerUnavailableError while the
    statement went on waiting on the server and committed later (so the documented read-back
    saw nothing and a repeat stored the item twice). The store's connections cap the server's
    lock wait at half the read timeout: the wait ends in 1205, is retried, and the write is
    stored once, when the lock is let go."""
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, read_timeout=4)
    try:
        store.save_list("u", "s", "m", ["a", "b"])
        store.append_list("u", "s", "m", ["c"])  # warm: the next append is one packet with its COMMIT
        store.save("u", "s", "v", 1)
        holder = connect(url)
        holder.autocommit(False)
        with holder.cursor() as cur:  # another transaction holds every row of the session for 6 s
            cur.execute(f"SELECT * FROM `{database}`.agentscope_sessions WHERE session_id = 'u:s' FOR UPDATE")
        timer = threading.Timer(6, holder.commit)
        timer.start()
        t0 = time.monotonic()
        if write == "append_list":
            assert store.append_list("u", "s", "m", ["d"]) == 4
        else:
            store.save("u", "s", "v", 2)
        took = time.monotonic() - t0
        timer.join()
        holder.close()
        assert 5 < took < 12, took  # it waited for the holder, through the retries
        assert store.stats.retries_by_errno.get(1205, 0) >= 2, store.stats.retries_by_errno
        rows = connect(url).cursor()
        rows.execute(f"SELECT state_key, item_index, state_data FROM `{database}`.agentscope_sessions"
                     " WHERE session_id = 'u:s' AND state_key IN ('m', 'v') ORDER BY state_key, item_index")
        expected = ["a", "b", "c", "d"] if write == "append_list" else ["a", "b", "c"]
        assert [r[2] for r in rows.fetchall()] == [f'"{x}"' for x in expected] + (["1"] if write == "append_list" else ["2"])
    finally:
        store.close()


def test_a_write_queued_behind_an_alter_table_longer_than_read_timeout_is_retried_not_lost(url, database):
    """A write waiting for the table's metadata lock (queued behind an ALTER TABLE that waits for
    a reader's transaction) longer than read_timeout met the driver's timeout (CommitUnknownError
    for a one-packet append). The store's connections cap that wait (lock_wait_timeout) as they
    cap row-lock waits: 1205, retried, and the append is stored once the ALTER is through."""
    store = MysqlAgentStateStore.from_url(url, database_name=database, create_if_not_exist=True, read_timeout=4)
    try:
        store.save_list("u", "s", "m", ["a"])
        store.append_list("u", "s", "m", ["b"])  # warm: the next append is one packet with its COMMIT
        reader = connect(url)
        reader.autocommit(False)
        with reader.cursor() as cur:  # a transaction that read the table holds its metadata lock
            cur.execute("START TRANSACTION")
            cur.execute(f"SELECT COUNT(*) FROM `{database}`.agentscope_sessions")
        altered: list = []

        def alter() -> None:  # waits for the reader; every later statement on the table queues behind it
            con = connect(url)
            with con.cursor() as c:
                c.execute(f"ALTER TABLE `{database}`.agentscope_sessions COMMENT 'altered'")
            con.close()
            altered.append(True)

        altering = threading.Thread(target=alter)
        altering.start()
        time.sleep(0.5)
        timer = threading.Timer(6, reader.commit)
        timer.start()
        t0 = time.monotonic()
        assert store.append_list("u", "s", "m", ["c"]) == 3
        took = time.monotonic() - t0
        timer.join()
        altering.join(10)
        reader.close()
        assert altered and 5 < took < 12, (altered, took)
        assert store.stats.retries_by_errno.get(1205, 0) >= 2, store.stats.retries_by_errno
        assert store.get_list("u", "s", "m") == ["a", "b", "c"]
    finally:
        store.close()
