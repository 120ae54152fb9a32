"""EXPERIMENT (not part of make bench): the parts of one throughput turn, in one process.

    .venv/bin/python benchmarks/experiments/proto_turn.py

A session as throughput.py seeds it (~150 AgentScope-shaped messages + a state value): the load
(`get_many`) against the floor's bare SELECT + loads, and the raw statement `get_many` sends.
"""
import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402,F401

import orjson
import pymysql

import data
from mysql_state import MysqlAgentStateStore, keys, sql

url, kw = harness.server()
DB = "msbench_turn"
s = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True)
msgs, summary = data.seeded_session(3)
s.save_many("tp", "t", values={"state": {"summary": summary, "turns": 0}}, lists={"context": msgs})
con = pymysql.connect(charset="utf8mb4", autocommit=True, **kw)
T = f"`{DB}`.`agentscope_sessions`"
sid = keys.pack("tp", "t")
stmt, params = sql.select_many(T, sid, ["state"], ["context"], [keys.hash_key("state"), keys.hash_key("context")])


def bare():
    with con.cursor() as cur:
        cur.execute(f"SELECT state_data FROM {T} WHERE session_id = %s AND state_key = 'context' ORDER BY item_index",
                    (sid,))
        return [orjson.loads(r[0]) for r in cur.fetchall()]


def raw_many():
    with con.cursor() as cur:
        cur.execute(stmt, params)
        return cur.fetchall()


def raw_many_loads():  # one column a row: the list's items as stored, the other rows marked
    return [orjson.loads(r[0]) for r in raw_many() if not r[0].startswith(sql.HEAD_MARK)]


ops = {"floor: bare SELECT + loads": bare, "get_many's statement (raw, no loads)": raw_many,
       "get_many's statement (raw) + loads": raw_many_loads,
       "store.get_many": lambda: s.get_many("tp", "t", values=["state"], lists=["context"])}
med = harness.interleaved(ops, 300)
print(f"{len(msgs)} messages; {harness.loadavg_text()}")
for k, v in med.items():
    print(f"  {k}: {v:.0f} us ({v / med['floor: bare SELECT + loads']:.2f}x)")
print("statement:", stmt[:400])
with con.cursor() as cur:
    cur.execute(f"DROP DATABASE {DB}")
