"""sql: the statement builders return (sql, params) and do no I/O."""

from __future__ import annotations

import doctest

from mysql_state import sql


def test_doctests():
    assert doctest.testmod(sql).failed == 0


def test_render_fills_table_and_collation_once():
    assert sql.render("SELECT * FROM {t} COLLATE {c}", "`d`.`t`", "utf8mb4_bin") == \
        "SELECT * FROM `d`.`t` COLLATE utf8mb4_bin"


def test_escaped_size_counts_what_pymysql_doubles():
    assert sql.escaped_size(b"abc") == 5
    assert sql.escaped_size(b"a'b\\c\n") == len(b"a'b\\c\n") + 3 + 2


def test_upserts_split_under_the_packet_limit_and_carry_extra_rows_last():
    head, tail = "INSERT INTO t VALUES ", " ON DUPLICATE KEY UPDATE x=1"
    rows = [("k", i, b'"' + b"x" * 100 + b'"') for i in range(50)]
    out = sql.upsert_rows((head, tail), "u:s", rows, 1000, extra=[("__catalog__", "u:s", 0, b"{}")])
    assert len(out) > 1
    for statement, params in out:
        assert statement.startswith(head) and statement.endswith(tail)
        assert statement.count("(%s, %s, %s, %s, 1)") * 4 == len(params)
    flat = [p for _, params in out for p in params]
    assert flat[-4:] == ["__catalog__", "u:s", 0, "{}"]
    assert [flat[i + 2] for i in range(0, len(flat) - 4, 4)] == list(range(50))


def test_select_many_asks_for_row_zero_of_values_and_whole_lists():
    statement, params = sql.select_many("t", "u:s", ["a"], ["m"], ["a:_hash", "m:_hash"])
    assert params[6:] == ("u:s", "a", "a:_hash", "m:_hash", "m")  # the WHERE's
    assert params[:6] == ("m", "m:_hash", "u:s", "m", "u:s", "m")  # the first list's marks
    assert "item_index = 0" in statement and statement.count("%s") == len(params)
    statement, params = sql.select_many("t", "u:s", ["a"], [], ["a:_hash"])
    assert params == ("u:s", "a", "a:_hash") and statement.count("%s") == len(params)


def test_prefix_reads_are_ranges_or_escaped_likes():
    statement, params = sql.select_prefix("t", "u:s", "a%_", exact=False)
    assert params == ("u:s", "a!%!_%") and "ESCAPE '!'" in statement
    statement, params = sql.select_prefix("t", "u:s", "ns/", exact=True)
    assert params == ("u:s", "ns/", "ns0") and "LIKE" not in statement
