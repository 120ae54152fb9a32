"""EXPERIMENT (not part of make bench): shapes of the short whole-list read, raw SQL vs the store.

    .venv/bin/python benchmarks/experiments/proto_reads.py

N = 10 and 100: a bare SELECT + loads (with and without the store's socket timeouts), the items
and the hash row read by one primary-key range (``state_key IN (k, k:_hash)``) with the index
column, the same as one column with the hash row marked (its MIN/MAX computed in its branch
only), and ``store.get_list``; interleaved rounds, medians.
"""
import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402

import orjson
import pymysql

import data
from mysql_state import MysqlAgentStateStore
from mysql_state.pool import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, DEFAULT_WRITE_TIMEOUT

DB = "msbench_reads"
T = f"`{DB}`.`agentscope_sessions`"
ONE = (f"SELECT IF(state_key = 'm', state_data, CONCAT(CHAR(31), GREATEST(version, 1), ',',"
       f" COALESCE((SELECT MIN(item_index) FROM {T} x WHERE x.session_id = %s AND x.state_key = 'm'), ''), ',',"
       f" COALESCE((SELECT MAX(item_index) FROM {T} y WHERE y.session_id = %s AND y.state_key = 'm'), ''), CHAR(31),"
       f" state_data)) FROM {T} WHERE session_id = %s AND state_key IN ('m', 'm:_hash') ORDER BY state_key, item_index")


def main() -> None:
    url, kw = harness.server()
    s = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True)
    for n in (10, 100):
        s.save_list("u", f"r{n}", "m", data.Conversation(n).base)
    plain = pymysql.connect(charset="utf8mb4", autocommit=True, database=DB, **kw)
    timed = pymysql.connect(charset="utf8mb4", autocommit=True, database=DB, read_timeout=DEFAULT_READ_TIMEOUT,
                            write_timeout=DEFAULT_WRITE_TIMEOUT, connect_timeout=DEFAULT_CONNECT_TIMEOUT, **kw)

    def rows(con, sql, params):
        with con.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def bare(con, sid):
        return [orjson.loads(r[0]) for r in rows(con, f"SELECT state_data FROM {T} WHERE session_id=%s"
                                                  " AND state_key='m' ORDER BY item_index", (sid,))]

    def inrange(sid):
        got = rows(plain, f"SELECT item_index, state_data, GREATEST(version, 1) FROM {T} WHERE session_id=%s"
                          " AND state_key IN ('m', 'm:_hash') ORDER BY state_key, item_index", (sid,))
        items = got[:-1]
        assert items[0][0] == 0 and items[-1][0] == len(items) - 1
        return [orjson.loads(r[1]) for r in items]

    def one(sid):
        got = rows(plain, ONE, (sid, sid, sid))
        assert got[-1][0].startswith("\x1f")
        return [orjson.loads(r[0]) for r in got[:-1]]

    for n in (10, 100):
        sid = f"u:r{n}"
        ops = {"bare SELECT + loads": lambda: bare(plain, sid),
               "bare, with the store's socket timeouts": lambda: bare(timed, sid),
               "IN-range items (index column) + hash row": lambda: inrange(sid),
               "IN-range, one column, hash row marked": lambda: one(sid),
               "store.get_list": lambda: s.get_list("u", f"r{n}", "m")}
        med = harness.interleaved(ops, 400)
        print(f"N={n} ({harness.loadavg_text()})")
        for k, v in med.items():
            print(f"  {k}: {v:.0f} us ({v / med['bare SELECT + loads']:.2f}x)")
    s.close()
    with plain.cursor() as cur:
        cur.execute(f"DROP DATABASE {DB}")


if __name__ == "__main__":
    main()
