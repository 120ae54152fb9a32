"""sql: the builders of the user predicate, the catalog page, prune, export and import give the
statements (and parameters, in order) that catalog.py, retention.py and transfer.py built
themselves before; no server. The references below are those modules' former code."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from mysql_state import catalog, keys, sql

PREFIXES = ["alice:", "a_b:", "50%:", "x!y:", ":", "\U0001f600é:"]
T0, T1 = dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(2024, 6, 1)


def old_user_range(prefix, exact, column):
    if prefix is None:
        return "", ()
    if exact:
        return f" AND {column} >= %s AND {column} < %s", (prefix, prefix[:-1] + ";")
    return (f" AND {column} LIKE %s ESCAPE '!' AND CAST(LEFT({column}, %s) AS BINARY) = CAST(%s AS BINARY)",
            (sql.like_prefix(prefix), len(prefix), prefix))


@pytest.mark.parametrize("prefix", PREFIXES + [None])
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("column", ["session_id", "state_key"])
def test_user_ids_is_the_former_user_range(prefix, exact, column):
    assert sql.user_ids(prefix, exact, column) == old_user_range(prefix, exact, column)


def test_user_range_keeps_its_name_and_answers():
    assert catalog.user_range(catalog.ALL_USERS, True) == ("", ())
    assert catalog.user_range("a_b", False, "session_id") == old_user_range("a_b:", False, "session_id")
    assert catalog.user_range(None, True) == old_user_range(keys.user_prefix(None), True, "state_key")


def test_user_ids_takes_only_a_key_column():
    with pytest.raises(ValueError):
        sql.user_ids("u:", True, "state_data) OR (1")


def test_the_user_statements_hold_the_one_predicate():
    """sessions_of_user (erasure, session lists) and the catalog's read by user: the same range
    on exact tables; on folding ones the escaped LIKE AND the exact prefix as bytes (the LIKE
    alone took 'Alice:' for 'alice:': the caller dropped those rows in Python)."""
    assert sql.SESSIONS_OF_USER.endswith("WHERE" + sql.user_ids("u:", True, "session_id")[0][4:])
    assert sql.SESSIONS_OF_USER_LIKE.endswith("WHERE" + sql.user_ids("u:", False, "session_id")[0][4:])
    assert sql.USER_SESSIONS_BY_CATALOG.endswith("session_id = %s" + sql.user_ids("u:", True)[0])
    assert sql.USER_SESSIONS_BY_CATALOG_LIKE.endswith("session_id = %s" + sql.user_ids("u:", False)[0])
    for prefix in PREFIXES:
        for exact in (True, False):
            template, params = sql.sessions_of_user(prefix, exact)
            assert template.count("%s") == len(params) == (2 if exact else 3)
            assert params == sql.user_ids(prefix, exact, "session_id")[1]
        # sessions.forget_user takes the LIKE pattern as the first parameter
        assert sql.sessions_of_user(prefix, exact=False)[1][0] == sql.like_prefix(prefix)


def old_catalog_page(prefix, exact, before, after, cursor, limit):
    where, params = old_user_range(prefix, exact, "state_key")
    for op, when in (("<", before), (">", after)):
        if when is not None:
            where += f" AND updated_at {op} %s"
            params += (when,)
    if cursor is not None:
        at, sid = cursor
        where += " AND (updated_at < %s OR (updated_at = %s AND state_key < %s))"
        params += (at, at, sid)
    template = sql.CATALOG_PAGE if prefix is None else sql.CATALOG_PAGE_OF_USER
    return template.replace("{where}", where), (keys.CATALOG_SESSION, *params, limit + 1)


@pytest.mark.parametrize("prefix, exact, before, after, cursor", list(itertools.product(
    ["a_b:", None], [True, False], [None, T0], [None, T1], [None, (T0, "u:s")])))
def test_catalog_page_is_the_former_page(prefix, exact, before, after, cursor):
    got = sql.catalog_page(prefix, exact, before, after, cursor, 10)
    assert got == old_catalog_page(prefix, exact, before, after, cursor, 10)
    assert got[0].count("%s") == len(got[1])


@pytest.mark.parametrize("prefix, exact, last", list(itertools.product(["a_b:", None], [True, False], [None, ("u:s", T0)])))
def test_prune_statements_are_the_former_ones(prefix, exact, last):
    user, uparams = old_user_range(prefix, exact, "state_key")
    cat = keys.CATALOG_SESSION
    assert sql.prune_count(prefix, exact, T1) == (sql.PRUNE_COUNT.replace("{user}", user), (cat, T1, *uparams))
    statement = sql.PRUNE_CANDIDATES.replace("{user}", user).replace("{after}", sql.PRUNE_AFTER if last else "")
    args = (cat, T1, *uparams, *((last[1], last[1], last[0]) if last else ()), 7)
    got = sql.prune_candidates(prefix, exact, T1, last, 7)
    assert got == (statement, args)
    assert got[0].count("%s") == len(got[1])


def old_scopes(prefix, sids, exact):
    if sids is not None:
        out = []
        for part in catalog.chunks(sids, 500):
            marks = ", ".join(["%s"] * len(part))
            out.append((f"session_id IN ({marks})", tuple(part)))
            out.append((f"session_id = %s AND state_key IN ({marks})" + sql.EXPORT_HAS_ROWS,
                        (keys.CATALOG_SESSION, *part)))
        return out
    if prefix is None:
        return [("LOCATE(':', session_id) > 0", ()), ("session_id = %s" + sql.EXPORT_HAS_ROWS, (keys.CATALOG_SESSION,))]
    rng, params = old_user_range(prefix, exact, "session_id")
    crng, cparams = old_user_range(prefix, exact, "state_key")
    return [("1 = 1" + rng, params), ("session_id = %s" + crng + sql.EXPORT_HAS_ROWS, (keys.CATALOG_SESSION, *cparams))]


@pytest.mark.parametrize("user_id, sids", [
    ("a_b", None), (None, None), (catalog.ALL_USERS, None), ("a_b", ["a_b:1"]),
    (catalog.ALL_USERS, [f"u:{i}" for i in range(1203)])])
@pytest.mark.parametrize("exact", [True, False])
def test_export_scopes_are_the_former_ones(user_id, sids, exact):
    from mysql_state import transfer
    got = transfer.scopes(user_id, sids, exact)
    assert got == old_scopes(catalog.prefix_of(user_id), sids, exact)
    for clause, params in got:
        assert clause.count("%s") == len(params)


def test_export_chunk_is_the_former_one():
    scope = ("session_id IN (%s, %s)", ("u:a", "u:b"))
    last = ("u:a", "k", 3, "data")
    for row in (None, last):
        expected = (sql.EXPORT_SELECT.replace("{where}", scope[0]) + (sql.EXPORT_AFTER if row else "")
                    + sql.EXPORT_ORDER, scope[1] + (sql.after(row) if row else ()) + (1000,))
        assert sql.export_chunk(scope, row, 1000) == expected
    assert sql.export_sessions(["h1", "h2", "h3"]) == ("session_id IN (%s, %s, %s)", ("h1", "h2", "h3"))


def old_drop_the_rest(held):
    where, params = [], []
    for (sid, k), (nxt, extra, has_hash) in held:
        extra = sorted(extra or ())
        where.append("(session_id = %s AND state_key = %s AND item_index >= %s"
                     + (f" AND item_index NOT IN ({', '.join(['%s'] * len(extra))})" if extra else "") + ")")
        params += [sid, k, nxt, *extra]
        if not has_hash:
            where.append("(session_id = %s AND state_key = %s)")
            params += [sid, keys.hash_key(k)]
    return sql.IMPORT_DELETE_WHERE + " OR ".join(where), tuple(params)


def test_import_drop_the_rest_is_the_former_delete():
    held = [(("u:s", "a"), (3, None, True)), (("u:s", "b"), (0, {9, 4}, False)), (("v:t", "c"), (1, None, False))]
    got = sql.import_drop_the_rest((sid, k, nxt, sorted(extra or ()), None if has_hash else keys.hash_key(k))
                                   for (sid, k), (nxt, extra, has_hash) in held)
    assert got == old_drop_the_rest(held)
    assert got[0].count("%s") == len(got[1])


def test_import_insert_is_head_rows_tail():
    rows = [tuple(range(7)), tuple(range(10, 17))]
    assert sql.import_insert("H ", rows, " T") == ("H " + ",".join([sql.IMPORT_ROW] * 2) + " T",
                                                   tuple(range(7)) + tuple(range(10, 17)))
    assert sql.import_insert("H ", rows[:1]) == ("H " + sql.IMPORT_ROW, tuple(range(7)))


def test_marks():
    assert sql.with_ids(sql.PRUNE_DELETE_ROWS, 2).endswith("IN (%s, %s)")
    assert sql.with_pairs(sql.IMPORT_EXISTING_KEYS, 2).endswith("IN ((%s, %s), (%s, %s))")
