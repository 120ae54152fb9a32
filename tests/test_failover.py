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
