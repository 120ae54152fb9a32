"""The store binds statement parameters itself (``sql.bind``: pymysql's escaping is a per-character
``str.translate``, the cost of every statement that carries list items). What the server reads
must be exactly what it reads from pymysql's literals, on a normal session and on one with
``NO_BACKSLASH_ESCAPES``; a connection of another charset is left to the driver."""

from __future__ import annotations

import random

import orjson
import pymysql
import pytest
from dbutils.pooled_db import PooledDB

from mysql_state import MysqlAgentStateStore, sql
from mysql_state.pool import parse_url

from .conftest import connect

NASTY = ["", "'", "''", "\\", "\\'", "'\\", "\0", "a\0b", "\x1a", "\n\r\t", '"', "%s", "%%", "--", "/*", "é€😀",
         "\\0", "\\Z", "' OR '1'='1", "\\\\'; DROP TABLE x; --", "\u2028", "_binary'x'"]


def _random_texts(n: int) -> list[str]:
    rng = random.Random(20261203)
    alphabet = "ab'\"\\\0\x1a\n\r%_é😀 "
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("mode", ["", "NO_BACKSLASH_ESCAPES"])
def test_every_literal_reads_back_as_its_value(url, mode):
    con = connect(url)
    with con.cursor() as cur:
        cur.execute("SET SESSION sql_mode = %s", (mode,))
        backslashes = not con.server_status & 512
        assert backslashes == (mode == "")
        for text in NASTY + _random_texts(300):
            cur.execute("SELECT " + sql.literal(text, backslashes) + ", "
                        + sql.literal(text.encode("utf-8"), backslashes))
            got_text, got_bytes = cur.fetchone()
            assert got_text == text and got_bytes == text.encode("utf-8"), repr(text)
        cur.execute("SELECT %s, %s" % (sql.literal(-7), sql.literal(None)))
        assert cur.fetchone() == (-7, None)
    assert sql.literal(b"\xff\xfe") is None  # not UTF-8: the driver's X'...'
    assert sql.literal(1.5) is None and sql.literal(True) is None  # other kinds: the driver's


@pytest.mark.parametrize("mode", ["", "NO_BACKSLASH_ESCAPES"])
def test_the_store_round_trips_nasty_text_in_either_mode(url, database, store, mode):
    kwargs, _ = parse_url(url)
    setsession = [f"SET SESSION sql_mode = '{mode}'"]
    pool = PooledDB(pymysql, maxconnections=4, blocking=False, setsession=setsession, charset="utf8mb4", **kwargs)
    mine = MysqlAgentStateStore(pool, database_name=database)
    try:
        texts = NASTY + _random_texts(50)
        mine.save("u", "s", "value", {"texts": texts, "'key\\": "v'\\"})
        mine.save_list("u", "s", "list", texts)
        mine.append_list("u", "s", "list", ["'\\ appended"])
        assert mine.get("u", "s", "value") == {"texts": texts, "'key\\": "v'\\"}
        assert mine.get_list("u", "s", "list") == texts + ["'\\ appended"]
        with connect(url).cursor() as cur:  # plain SQL: the rows hold the JSON of the values
            cur.execute(f"SELECT state_data FROM `{database}`.agentscope_sessions"
                        " WHERE session_id = 'u:s' AND state_key = 'list' ORDER BY item_index")
            assert [orjson.loads(r[0]) for r in cur.fetchall()] == texts + ["'\\ appended"]
    finally:
        mine.close()


def test_a_connection_of_another_charset_is_bound_by_the_driver(url, database, store):
    """A given pool in latin1: the store's binding is for utf8mb4 only; the driver's is used."""
    kwargs, _ = parse_url(url)
    pool = PooledDB(pymysql, maxconnections=2, blocking=False, charset="latin1", **kwargs)
    mine = MysqlAgentStateStore(pool, database_name=database)
    try:
        mine.save("u", "s", "k", {"t": "it's a \\ test"})
        assert mine.get("u", "s", "k") == {"t": "it's a \\ test"} == store.get("u", "s", "k")
    finally:
        mine.close()
