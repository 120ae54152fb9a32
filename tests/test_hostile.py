"""Hostile input over the whole public API: arbitrary strings for every id and name.

Each call either round-trips exactly or raises ValueError/TypeError before touching the
database: never a raw driver error, never a row in another user's namespace, never a
changed schema.
"""

from __future__ import annotations

import pymysql
from dbutils.pooled_db import PooledDB
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_state import MysqlAgentStateStore, MysqlStateError
from mysql_state.keys import IDENTIFIER_RULE

from .conftest import connect

# Everything, surrogates and NUL included; plus known troublemakers and huge strings.
any_char = st.characters(codec=None, categories=None)
hostile = st.one_of(
    st.text(any_char, max_size=30),
    st.sampled_from(["", " ", "a:b", "__anon__", "k:_hash", "x' OR '1'='1", "'; DROP TABLE agentscope_sessions; --",
                     "%", "_", "\\", "\x00", "\ud800", "😀" * 10, "a" * 256, "b" * 65_535, "Ü", "u\u0308"]),
)
STATS = {"calls": 0, "round_trips": 0, "refused": 0}
SENTINEL = ("sentinel-user", "sentinel-session", "sentinel-key")


def schema_of(con, database: str) -> list:
    with con.cursor() as cur:
        cur.execute("SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS"
                    " WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, ORDINAL_POSITION", (database,))
        return list(cur.fetchall())


class CountingPool(PooledDB):
    """A real PooledDB that counts checkouts: a refused call must not take a connection."""

    checkouts = 0

    def connection(self, *args, **kwargs):
        CountingPool.checkouts += 1
        return super().connection(*args, **kwargs)


@pytest.fixture(scope="module")
def hostile_store(url):
    import uuid

    from mysql_state.pool import parse_url

    database = "h_" + uuid.uuid4().hex[:12]
    kwargs, _ = parse_url(url)
    pool = CountingPool(pymysql, maxconnections=4, blocking=False, charset="utf8mb4", **kwargs)
    store = MysqlAgentStateStore(pool, database_name=database, create_if_not_exist=True)
    store.save(*SENTINEL, {"untouched": True})
    con = connect(url)
    yield store, con, database
    with con.cursor() as cur:
        cur.execute(f"DROP DATABASE `{database}`")
    con.close()
    store.close()
    pool.close()


def attempt(fn):
    """Run one call: it returns, or raises ValueError/TypeError; anything else fails the test."""
    STATS["calls"] += 1
    checkouts = CountingPool.checkouts
    try:
        return True, fn()
    except (ValueError, TypeError) as exc:
        assert not isinstance(exc, pymysql.err.Error)
        assert CountingPool.checkouts == checkouts, f"{exc!r} was raised after taking a connection"
        STATS["refused"] += 1
        return False, exc
    except MysqlStateError as exc:  # a database error after validation passed is a bug here
        raise AssertionError(f"validated input reached the server and failed: {exc!r}") from exc


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(user=st.one_of(st.none(), hostile), session=hostile, key=hostile, value=st.one_of(hostile, st.none()))
def test_every_call_round_trips_or_is_refused_before_sql(hostile_store, user, session, key, value):
    store, con, database = hostile_store
    before = schema_of(con, database)
    ok, _ = attempt(lambda: store.save(user, session, key, {"v": value}))
    if ok:
        assert store.get(user, session, key) == {"v": value}
        assert store.exists(user, session)
        STATS["round_trips"] += 1
    ok, _ = attempt(lambda: store.save_list(user, session, key, [value, {"v": value}]))
    if ok:
        assert store.get_list(user, session, key) == [value, {"v": value}]
        n_ok, n = attempt(lambda: store.append_list(user, session, key, [value]))
        assert n_ok and n == 3 and store.list_length(user, session, key) == 3
        assert store.get_list(user, session, key, offset=-1) == [value]
        STATS["round_trips"] += 1
    ok, ids = attempt(lambda: store.list_session_ids(user))
    if ok:
        assert all(isinstance(i, str) for i in ids)
        if user is None or (isinstance(user, str) and not user.strip()):
            pass
        else:
            assert "sentinel-session" not in ids or user == SENTINEL[0]
    attempt(lambda: store.get_versioned(user, session, key))
    attempt(lambda: store.save_if_version(user, session, key, value, 0))
    attempt(lambda: store.delete(user, session, key))
    attempt(lambda: store.delete(user, session))
    # the sentinel is untouched, nothing lives under a namespace nobody wrote, schema unchanged
    assert store.get(*SENTINEL) == {"untouched": True}
    assert schema_of(con, database) == before
    with con.cursor() as cur:
        cur.execute(f"SELECT DISTINCT session_id FROM `{database}`.`agentscope_sessions`"
                    " WHERE session_id LIKE '%:%' OR state_key <> 'sentinel-user:sentinel-session'")
        owners = {r[0] for r in cur.fetchall()}
    assert owners == {"sentinel-user:sentinel-session"}  # every write above was deleted again


@settings(max_examples=150, deadline=None)
@given(name=hostile)
def test_database_and_table_names_are_valid_or_refused_without_sql(name):
    import re

    valid = bool(name.strip()) and len(name) <= 64 and re.fullmatch(IDENTIFIER_RULE[1:-1], name) is not None
    for kw in ("database_name", "table_name"):
        STATS["calls"] += 1
        try:
            # an object with no .connection(): any SQL attempt would be a TypeError of another kind
            MysqlAgentStateStore(object(), **{kw: name})
        except ValueError as exc:
            assert not valid and repr(name)[:30].rstrip("'") in str(exc) and "must match" in str(exc)
            STATS["refused"] += 1
        except TypeError as exc:
            assert valid or not name.strip(), exc  # reached the pool check: the name passed validation
            assert "pool must have a .connection()" in str(exc)


def test_hostile_report(report):
    """The hostile tests above ran and both outcomes occurred: ids that round-tripped exactly and
    ids refused before any SQL (a run where hypothesis drew nothing of one kind proves nothing)."""
    assert STATS["calls"] >= 100, STATS
    assert STATS["round_trips"] > 0 and STATS["refused"] > 0, STATS
    assert STATS["round_trips"] + STATS["refused"] <= STATS["calls"], STATS
    report(f"hostile input: {STATS['calls']} calls with arbitrary ids and names; {STATS['round_trips']} "
           f"round-tripped exactly, {STATS['refused']} refused with ValueError/TypeError before any SQL; "
           "no driver error, no foreign row, schema unchanged")


# ---- every argument of every public method ------------------------------------------------------

GOOD = {"user_id": "u", "session_id": "s", "key": "k", "value": 1, "values": [1], "items": [1],
        "expected_version": 0, "offset": 0, "limit": 1, "type": None, "timeout": 1.0, "fn": lambda tx: None}
BAD = {"user_id": 5, "session_id": None, "key": None, "values": {"a": 1}, "items": "ab", "expected_version": "1",
       "offset": "0", "limit": -1, "type": 5, "timeout": -1, "fn": None, "value": float("nan")}
CALLS = {
    "save": ("user_id", "session_id", "key", "value"),
    "get": ("user_id", "session_id", "key", "type"),
    "get_versioned": ("user_id", "session_id", "key", "type"),
    "save_if_version": ("user_id", "session_id", "key", "value", "expected_version"),
    "save_list": ("user_id", "session_id", "key", "values"),
    "save_list_report": ("user_id", "session_id", "key", "values"),
    "save_list_if_version": ("user_id", "session_id", "key", "values", "expected_version"),
    "append_list": ("user_id", "session_id", "key", "items"),
    "pop_list": ("user_id", "session_id", "key", "type"),
    "get_list": ("user_id", "session_id", "key", "type", "offset", "limit"),
    "get_list_versioned": ("user_id", "session_id", "key", "type"),
    "list_length": ("user_id", "session_id", "key"),
    "exists": ("user_id", "session_id"),
    "delete": ("user_id", "session_id"),
    "session_lock": ("user_id", "session_id", "timeout"),
    "transaction": ("fn",),
    "forget_user": ("user_id",),
}
NAMED = {"user_id": "user_id", "session_id": "session_id", "key": "key", "values": "values", "items": "items",
         "expected_version": "expected_version", "offset": "offset", "limit": "limit", "type": "type",
         "timeout": "timeout", "fn": "fn", "value": "key 'k'"}


@pytest.mark.parametrize("method, param", [(m, p) for m, ps in CALLS.items() for p in ps])
def test_every_argument_is_checked_before_a_connection_naming_it(hostile_store, method, param):
    store = hostile_store[0]
    names = CALLS[method]
    args = [BAD[n] if n == param else GOOD[n] for n in names]
    positional = [a for n, a in zip(names, args) if n not in ("type", "offset", "limit", "timeout")]
    keywords = {n: a for n, a in zip(names, args) if n in ("type", "offset", "limit", "timeout")}
    checkouts = CountingPool.checkouts
    with pytest.raises((TypeError, ValueError)) as err:
        getattr(store, method)(*positional, **keywords)
    assert NAMED[param] in str(err.value), (method, param, str(err.value))
    assert CountingPool.checkouts == checkouts, f"{method}: refused after taking a connection"


# ---- arguments ------------------------------------------------------------------------


def test_huge_offsets_and_limits_are_answered_without_sql_errors(store):
    store.save_list("u", "s", "m", list(range(5)))
    assert store.get_list("u", "s", "m", offset=-(2**64)) == list(range(5))
    assert store.get_list("u", "s", "m", limit=2**64) == list(range(5))
    assert store.get_list("u", "s", "m", offset=2**64) == []
    assert store.get_list("u", "s", "m", offset=-(2**64), limit=2) == [0, 1]


@pytest.mark.parametrize("option, bad, error", [
    ("pool_size", -1, ValueError), ("pool_size", 0, ValueError), ("pool_size", "8", TypeError),
    ("pool_timeout", 0, ValueError), ("pool_timeout", -1.0, ValueError), ("retries", -1, ValueError),
    ("snapshot_bytes", -5, ValueError), ("connect_timeout", 0, ValueError), ("read_timeout", "x", TypeError),
    ("write_timeout", float("nan"), ValueError),
])
def test_bad_options_are_refused_naming_the_option(url, option, bad, error):
    with pytest.raises(error, match=option):
        MysqlAgentStateStore.from_url(url, **{option: bad})


@pytest.mark.parametrize("option, bad", [
    ("create_if_not_exist", "no"), ("create_if_not_exist", 1), ("keep_history", "false"), ("database_name", 123),
])
def test_on_off_options_must_be_bools_and_names_strs(url, option, bad):
    """A review of 2026-12-06: "no" and "false" are truthy, so judged by truthiness they switched
    the option on (create_if_not_exist="no" made the database); now refused, naming it."""
    with pytest.raises(TypeError, match=option.replace("_name", " name")):
        MysqlAgentStateStore.from_url(url, **{option: bad})


def test_on_off_arguments_of_calls_must_be_bools_and_nothing_is_done(store, raw):
    store.save_list("u", "s", "m", [1, 2])
    raw.execute("UPDATE {t} SET state_data = '[9]' WHERE session_id = 'u:s' AND state_key = 'm' AND item_index = 1")
    before = raw.all_rows()
    calls = {"fix": lambda: store.doctor(fix="false"), "dry_run": lambda: store.migrate(dry_run=0),
             "versioned": lambda: store.get_many("u", "s", values=["m"], versioned="no"),
             "dry_run ": lambda: store.prune(__import__("datetime").timedelta(days=1), dry_run=None)}
    for name, call in calls.items():
        with pytest.raises(TypeError, match=name.strip()):
            call()
    assert raw.all_rows() == before  # the doctor repaired nothing


def test_unordered_items_and_misnamed_containers_are_refused_naming_the_key(store, raw):
    before = raw.all_rows()
    with pytest.raises(TypeError, match="values .*set.*no order"):
        store.save_list("u", "s", "m", {3, 1, 2})
    with pytest.raises(TypeError, match=r"items .*frozenset"):
        store.append_list("u", "s", "m", frozenset({1}))
    with pytest.raises(TypeError, match=r"lists\['L'\]"):
        store.save_many("u", "s", lists={"L": "abc"})
    with pytest.raises(TypeError, match=r"appends\['L'\]"):
        store.append_lists("u", "s", {"L": "abc"})
    with pytest.raises(ValueError, match=r"at\['L'\] must be a list's length"):
        store.append_lists("u", "s", {"L": [1]}, at={"L": -1})
    with pytest.raises(TypeError, match="lines must be an iterable of export lines"):
        store.import_rows('{"session_id": "u:s"}')
    assert raw.all_rows() == before


def test_deleting_a_key_that_is_not_there_is_no_activity(store, raw):
    """A delete that removes nothing writes nothing: the session's catalog row (its version and
    activity time, which prune reads) stays as it was."""
    store.save("u", "s", "k", 1)
    catalog = lambda: raw.query("SELECT version, updated_at FROM {t} WHERE session_id = '__catalog__' AND state_key = 'u:s'")  # noqa: E731
    before, rows = catalog(), raw.all_rows()
    store.delete("u", "s", "absent")
    store.delete_keys("u", "s", ["absent", "also-absent"])
    assert catalog() == before and raw.all_rows() == rows
    store.delete("u", "s", "k")  # the session's last key: the session and its catalog row go
    assert catalog() == [] and not store.exists("u", "s")


def test_missing_keys_are_refused_before_any_connection(store, raw):
    before = store.stats.transactions
    calls = {
        "save": lambda: store.save("u", "s", None, 1),
        "get": lambda: store.get("u", "s", None),
        "save_list": lambda: store.save_list("u", "s", None, [1]),
        "append_list": lambda: store.append_list("u", "s", None, [1]),
        "get_list": lambda: store.get_list("u", "s", None),
        "list_length": lambda: store.list_length("u", "s", None),
        "save_if_version": lambda: store.save_if_version("u", "s", None, 1, 0),
        "get_versioned": lambda: store.get_versioned("u", "s", None),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match="key must be a str"):
            call()
    with pytest.raises(TypeError, match="expected_version"):
        store.save_if_version("u", "s", "k", 1, None)
    with pytest.raises(TypeError, match="offset"):
        store.get_list("u", "s", "m", offset=None)
    with pytest.raises(TypeError, match="values must be a mapping"):
        store.save_many("u", "s", values=[1])
    assert store.stats.transactions == before and raw.rows() == []


def test_a_nan_inside_an_enum_or_nested_deep_is_refused_and_writes_nothing(store, raw):
    """orjson writes NaN and infinities as null: a plain NaN was refused, one inside an Enum's
    value or nested deeper than 200 levels was stored as null (audit of 2026-12-07)."""
    import enum

    class Score(enum.Enum):
        UNKNOWN = float("nan")
        ODD = {"x": float("inf")}

    deep: object = float("nan")
    for _ in range(210):
        deep = [deep]
    for value in (Score.UNKNOWN, Score.ODD, deep):
        with pytest.raises(ValueError, match="JSON cannot represent"):
            store.save("u", "s", "k", value)
        with pytest.raises(ValueError, match="item 1 of list 'l'"):
            store.save_list("u", "s", "l", [1, value, 3])
        with pytest.raises(ValueError, match="JSON cannot represent"):
            store.append_list("u", "s", "l", [value])
    assert raw.rows("u:s") == []


@pytest.mark.parametrize("keyword", ["database", "db", "charset", "use_unicode", "autocommit", "cursorclass",
                                     "conv", "client_flag", "defer_connect"])
def test_a_pymysql_keyword_the_store_sets_itself_is_refused_before_connecting(url, keyword):
    """database="other" raised "the database was dropped while the store was open",
    use_unicode=False broke every read, autocommit= got DBUtils' "multiple values" (audit of
    2026-12-07): each is refused naming the keyword, nothing connected."""
    with pytest.raises(ValueError, match=f"{keyword}= is not an option"):
        MysqlAgentStateStore.from_url(url.replace("mysql://root@", "mysql://root:s3cret@"), database_name="x",
                                      **{keyword: None})


def test_a_misspelt_option_of_from_url_names_itself_and_the_closest_option(url):
    """from_url(url, pool_sise=3) raised the driver's "Connection.__init__() got an unexpected
    keyword argument" when the first connection opened, naming neither from_url nor its
    options (a new user's walk-through, 2026-12-07)."""
    from mysql_state import AsyncMysqlAgentStateStore

    with pytest.raises(TypeError, match="'pool_sise' \\(did you mean 'pool_size'\\?\\)"):
        MysqlAgentStateStore.from_url(url, pool_sise=3)
    with pytest.raises(TypeError, match="'init_comand' \\(did you mean 'init_command'\\?\\)"):
        AsyncMysqlAgentStateStore.from_url(url, init_comand="SET @x = 1")
