"""EXPERIMENT: does a socket timeout (read_timeout/write_timeout) slow a short read?"""
import harness
import random, statistics, time
import orjson, pymysql, data
from mysql_state import MysqlAgentStateStore
from mysql_state.pool import DEFAULT_READ_TIMEOUT, DEFAULT_WRITE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
url, kw = harness.server()
s = MysqlAgentStateStore.from_url(url, database_name="msbench_to", create_if_not_exist=True)
print("defaults", DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, DEFAULT_WRITE_TIMEOUT)
for n in (10, 100):
    s.save_list("u", f"r{n}", "m", data.Conversation(n).base)
plain = pymysql.connect(charset="utf8mb4", autocommit=True, database="msbench_to", **kw)
timed = pymysql.connect(charset="utf8mb4", autocommit=True, database="msbench_to", read_timeout=DEFAULT_READ_TIMEOUT,
                        write_timeout=DEFAULT_WRITE_TIMEOUT, connect_timeout=DEFAULT_CONNECT_TIMEOUT, **kw)
T = "`msbench_to`.`agentscope_sessions`"
def sel(con, sid):
    with con.cursor() as cur:
        cur.execute(f"SELECT state_data FROM {T} WHERE session_id=%s AND state_key='m' ORDER BY item_index", (sid,))
        return [orjson.loads(r[0]) for r in cur.fetchall()]
for n in (10, 100):
    ops = {"no timeout": lambda: sel(plain, f"u:r{n}"), "read/write timeout": lambda: sel(timed, f"u:r{n}"),
           "store.get_list": lambda: s.get_list("u", f"r{n}", "m")}
    samples = {k: [] for k in ops}
    rng = random.Random(1)
    for _ in range(400):
        order = list(ops); rng.shuffle(order)
        for k in order:
            t0 = time.perf_counter_ns(); ops[k](); samples[k].append(time.perf_counter_ns() - t0)
    print(n, {k: round(statistics.median(v) / 1000) for k, v in samples.items()}, harness.loadavg_text())
s.close()

# the IN-range read: items then the hash row, one primary-key range scan, no UNION
s = MysqlAgentStateStore.from_url(url, database_name="msbench_to", create_if_not_exist=True)
def inrange(con, sid):
    with con.cursor() as cur:
        cur.execute(f"SELECT item_index, state_data, GREATEST(version, 1) FROM {T} WHERE session_id=%s"
                    " AND state_key IN ('m', 'm:_hash') ORDER BY state_key, item_index", (sid,))
        rows = cur.fetchall()
    head = rows[-1]
    items = rows[:-1]
    assert items[0][0] == 0 and items[-1][0] == len(items) - 1
    return [orjson.loads(r[1]) for r in items]
for n in (10, 100):
    ops = {"bare": lambda: sel(plain, f"u:r{n}"), "IN-range items + hash row": lambda: inrange(plain, f"u:r{n}"),
           "store.get_list": lambda: s.get_list("u", f"r{n}", "m")}
    samples = {k: [] for k in ops}
    rng = random.Random(1)
    for _ in range(400):
        order = list(ops); rng.shuffle(order)
        for k in order:
            t0 = time.perf_counter_ns(); ops[k](); samples[k].append(time.perf_counter_ns() - t0)
    print("IN", n, {k: round(statistics.median(v) / 1000) for k, v in samples.items()}, harness.loadavg_text())
s.close()

s = MysqlAgentStateStore.from_url(url, database_name="msbench_to", create_if_not_exist=True)
ONE = (f"SELECT IF(state_key = 'm', state_data, CONCAT(CHAR(31), GREATEST(version, 1), ',',"
       f" COALESCE((SELECT MIN(item_index) FROM {T} x WHERE x.session_id = %s AND x.state_key = 'm'), ''), ',',"
       f" COALESCE((SELECT MAX(item_index) FROM {T} y WHERE y.session_id = %s AND y.state_key = 'm'), ''), CHAR(31),"
       f" state_data)) FROM {T} WHERE session_id = %s AND state_key IN ('m', 'm:_hash') ORDER BY state_key, item_index")
def one(con, sid):
    with con.cursor() as cur:
        cur.execute(ONE, (sid, sid, sid))
        rows = cur.fetchall()
    assert rows[-1][0].startswith("\x1f")
    return [orjson.loads(r[0]) for r in rows[:-1]]
for n in (10, 100):
    ops = {"bare": lambda: sel(plain, f"u:r{n}"), "one column, IN-range, marked hash row": lambda: one(plain, f"u:r{n}"),
           "store.get_list": lambda: s.get_list("u", f"r{n}", "m")}
    samples = {k: [] for k in ops}
    rng = random.Random(1)
    for _ in range(400):
        order = list(ops); rng.shuffle(order)
        for k in order:
            t0 = time.perf_counter_ns(); ops[k](); samples[k].append(time.perf_counter_ns() - t0)
    print("ONE", n, {k: round(statistics.median(v) / 1000) for k, v in samples.items()}, harness.loadavg_text())
s.close()
