"""A transaction that wrote nothing is never "unknown" (issue 18 item 20): when its COMMIT
fails (the connection cut around it here; a Galera node without quorum answering 1047 in
tests/test_galera_store.py) the call goes on, on a fresh connection or the next host, while
a transaction that wrote still raises CommitUnknownError."""

from __future__ import annotations

import pytest

from mysql_state import CommitUnknownError, MysqlAgentStateStore
from mysql_state.pool import parse_url

from .faultproxy import FaultProxy


@pytest.fixture
def proxy(url):
    kwargs, _ = parse_url(url)
    p = FaultProxy(kwargs.get("host", "127.0.0.1"), kwargs.get("port", 3306))
    p.url = f"mysql://{kwargs['user']}" + (f":{kwargs['password']}" if kwargs["password"] else "") + f"@127.0.0.1:{p.port}/"
    yield p
    p.close()


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_read_only_setup_whose_commit_is_cut_opens_the_store(proxy, store, database, raw, when):
    store.save("u", "s", "k", 1)  # the table exists: the set-up only reads (SELECT, SET)
    proxy.cut_on_commit = when
    with MysqlAgentStateStore.from_url(proxy.url, database_name=database, pool_size=2) as opened:
        assert proxy.commits_cut == 1  # its COMMIT was cut, and it went on
        assert opened.get("u", "s", "k") == 1
        assert opened.stats.reconnects >= 1
        proxy.cut_on_commit = when  # a transaction that wrote: still unknown, never repeated
        with pytest.raises(CommitUnknownError, match="during COMMIT"):
            opened.save("u", "s", "k", 2)
    assert raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'k'") == \
        [("1" if when == "before" else "2",)]


# ---- a host that stops answering (frozen: SIGSTOP, a paused VM), first in the host list ------------


def _listed(proxy, url: str) -> str:
    """A host list URL: the proxy first, the real server second (the same data behind both)."""
    kwargs, _ = parse_url(url)
    user = kwargs["user"] + (f":{kwargs['password']}" if kwargs["password"] else "")
    return f"mysql://{user}@127.0.0.1:{proxy.port},{kwargs.get('host', '127.0.0.1')}:{kwargs.get('port', 3306)}/"


def test_a_new_store_skips_a_first_host_that_accepts_but_never_answers(proxy, url, store, database, raw):
    """The handshake is bounded by connect_timeout (pymysql waited for the greeting with
    read_timeout), and a host whose handshake times out is left for the next one."""
    import time

    proxy.frozen = True
    started = time.monotonic()
    with MysqlAgentStateStore.from_url(_listed(proxy, url), database_name=database, connect_timeout=1,
                                       read_timeout=20) as listed:
        listed.save("u", "s", "k", 1)
        assert listed.get("u", "s", "k") == 1
    assert time.monotonic() - started < 10  # not read_timeout (20 s) per connection
    assert raw.query("SELECT state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'k'") == [("1",)]


def test_a_host_that_freezes_under_a_running_store_is_left_for_the_next_with_nothing_lost_or_doubled(
        proxy, url, store, database, raw):
    """Connected through the first host, which then stops answering: the next call waits
    read_timeout, then goes on on the second host (nothing was committed on the first); later
    calls go there at once. A one-packet write (an append and its COMMIT) caught in the freeze
    raises CommitUnknownError as documented; a read or a locked write goes on."""
    import time

    with MysqlAgentStateStore.from_url(_listed(proxy, url), database_name=database, connect_timeout=1,
                                       read_timeout=2, pool_size=2) as listed:
        listed.save_list("u", "s", "log", [0, 1])
        assert listed.get_list("u", "s", "log") == [0, 1]
        proxy.frozen = True
        started = time.monotonic()
        assert listed.get_list("u", "s", "log") == [0, 1]  # a read: the next host, after read_timeout
        assert time.monotonic() - started < 6
        started = time.monotonic()
        listed.save("u", "s", "v", {"n": 1})  # the host is marked down: straight to the next
        listed.append_list("u", "s", "log", [2])
        assert time.monotonic() - started < 2
        assert listed.get_list("u", "s", "log") == [0, 1, 2] and listed.get("u", "s", "v") == {"n": 1}
        assert listed.stats.reconnects >= 1
    proxy.frozen = False
    rows = raw.query("SELECT item_index, state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'log' ORDER BY item_index")
    assert rows == [(0, "0"), (1, "1"), (2, "2")]  # each item once


def test_a_connect_error_s_chain_shows_no_stray_index_error():
    """DBUtils opens a connection while handling its empty idle cache's IndexError; that
    IndexError is no part of the error and is not shown in the traceback's chain."""
    import socket
    import traceback

    from mysql_state import ServerUnavailableError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with pytest.raises(ServerUnavailableError) as info:
        MysqlAgentStateStore.from_url(f"mysql://root@127.0.0.1:{port}/x", connect_timeout=1)
    shown = "".join(traceback.format_exception(info.value))
    assert "Connection refused" in shown and "IndexError" not in shown


# ---- error 1180 (ER_ERROR_DURING_COMMIT): before COMMIT nothing is stored, at COMMIT unknown -------

_NOT_PRIMARY = ("Error while appending streaming replication fragment(provider status: Not connected "
                "to Primary Component)")


def test_error_1180_on_a_statement_before_commit_is_retried_and_stored_once(proxy, store, database, raw):
    """Audit R4, the half no Galera cluster here produces at will: a statement refused with
    1180 before COMMIT (a Galera node failing to append a streaming-replication fragment
    locally; nothing was committed, the server rolls the transaction back) was a QueryError.
    It is retried (on the next host of a list; here the only one, after a back-off), and the
    item is stored once. The proxy answers the statement in the server's place: the server
    never runs it. The COMMIT half is tested on a real cluster: tests/test_galera_store.py."""
    with MysqlAgentStateStore.from_url(proxy.url, database_name=database, pool_size=2) as via:
        via.save_list("u", "s", "log", [0])
        via.save("u", "s", "k", "v0")
        proxy.fail_next(1180, _NOT_PRIMARY, b"INSERT")
        via.append_list("u", "s", "log", [1])
        proxy.fail_next(1180, _NOT_PRIMARY, b"INSERT")
        via.transaction(lambda tx: tx.save("u", "s", "k", "v1"))
        assert proxy.failed == 2
        assert via.stats.reconnects >= 2  # each moved on (a host list's next host; here the same)
        assert via.get_list("u", "s", "log") == [0, 1] and via.get("u", "s", "k") == "v1"
    rows = raw.query("SELECT item_index, state_data FROM {t} WHERE session_id = 'u:s' AND state_key = 'log' "
                     "ORDER BY item_index")
    assert rows == [(0, "0"), (1, "1")]  # once
