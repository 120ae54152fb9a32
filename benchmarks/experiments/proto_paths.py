"""EXPERIMENT (not part of make bench): what each step of DESIGN-issue21.md would buy, measured
with raw SQL on the store's own table (mysql_state is not changed).

    .venv/bin/python benchmarks/experiments/proto_paths.py > /tmp/proto.txt

A. statement shapes of a write (each + COMMIT), interleaved rounds, medians;
B. the short-list read: today's statement vs alternatives, and the store's Python overhead;
C. the encrypted read's per-row open: today's opener vs a leaner one (same checks);
D. the digest of a prefix: SHA-256 vs BLAKE3, and extending a remembered hasher.
"""

from __future__ import annotations

import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402,F401

import base64
import hashlib
import random
import statistics
import time

import orjson
import pymysql

import data
from mysql_state import Keyring, MysqlAgentStateStore
from mysql_state.crypto import PREFIX, RowCipher

DB = "msbench_proto"
T = f"`{DB}`.`agentscope_sessions`"
CAT = "__catalog__"


interleaved = harness.interleaved


def show(title: str, res: dict, ref: str | None = None) -> None:
    print(f"## {title} ({harness.loadavg_text()})")
    for k, v in res.items():
        extra = f"  ({v / res[ref]:.2f}x {ref})" if ref and k != ref else ""
        print(f"  {k}: {v:.0f} us{extra}")
    print()


class Writes:
    """A: one list of one session; each op appends one ~530-byte message at the next index."""

    def __init__(self, kwargs: dict) -> None:
        self.con = pymysql.connect(charset="utf8mb4", autocommit=False, database=DB, **kwargs)
        self.cur = self.con.cursor()
        self.msg = orjson.dumps(data.message(random.Random(2), 1)).decode()
        self.n = {}
        self.hash = {}
        self.ver = {}

    def _next(self, sid: str) -> int:
        self.n[sid] = self.n.get(sid, 1000) + 1
        return self.n[sid]

    def floor(self, rows: int = 1):
        sid = "floor"

        def op():
            vals = []
            for _ in range(rows):
                vals += [sid, "m", self._next(sid), self.msg]
            self.cur.execute(f"INSERT INTO {T} (session_id, state_key, item_index, state_data) VALUES "
                             + ",".join(["(%s,%s,%s,%s)"] * rows), vals)
            self.con.commit()
        return op

    def append(self, sid: str, *, catalog: bool, by_version: bool, value: bool = False, items: int = 1):
        """The one-statement conditional append (sql.APPEND_IF_HASH_TAIL's shape)."""
        hk = "m:_hash"
        self.cur.execute(f"INSERT INTO {T} (session_id, state_key, item_index, state_data, version) VALUES "
                         "(%s,%s,0,%s,1) ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                         (sid, hk, self._hash_text(sid, 0)))
        self.cur.execute(f"SELECT GREATEST(version, 1) FROM {T} WHERE session_id=%s AND state_key=%s AND item_index=0",
                         (sid, hk))
        self.ver[sid] = int(self.cur.fetchone()[0])
        self.hash[sid] = self._hash_text(sid, 0)
        self.con.commit()
        vver = [0]

        def op():
            new = self._hash_text(sid, self.n.get(sid, 1000))
            rows = [(sid, hk, 0, new)] + [(sid, "m", self._next(sid), self.msg) for _ in range(items)]
            if value:
                rows.append((sid, "state", 0, '{"summary": "' + "s" * 200 + '", "turns": 1}'))
            if catalog:
                rows.append((CAT, sid, 0, "{}"))
            cond = "version = %s" if by_version else "CAST(state_data AS BINARY) = CAST(%s AS BINARY)"
            expect = self.ver[sid] if by_version else self.hash[sid]
            sql = (f"INSERT INTO {T} (session_id, state_key, item_index, state_data, version) VALUES "
                   + ",".join(["(%s,%s,%s,%s,1)"] * len(rows))
                   + f" ON DUPLICATE KEY UPDATE version = IF(state_key = %s AND {cond}, LAST_INSERT_ID(version + 1),"
                   f" IF(session_id = '{CAT}' OR state_key = 'state', version + 1, version)),"
                   f" state_data = IF(state_key = %s AND {cond}, VALUES(state_data),"
                   " IF(state_key = 'state', VALUES(state_data), state_data))")
            params = [x for r in rows for x in r] + [hk, expect, hk, expect]
            self.cur.execute(sql, params)
            assert self.cur.lastrowid, "condition failed"
            self.ver[sid] = int(self.cur.lastrowid)
            self.hash[sid] = new
            vver[0] += 1
            self.con.commit()
        return op

    def _hash_text(self, sid: str, n: int) -> str:
        h = hashlib.sha256(f"{sid}{n}".encode()).hexdigest()
        return orjson.dumps({"fmt": "mysql-state/list-v2", "n": n, "sum": h[:32], "p": n - 1, "plen": 530 * n,
                             "ph": h, "psum": h[32:]}).decode()

    def locked_append(self, sid: str):
        """Today's path after a failed speculation minus the failure: lock, write, COMMIT."""
        hk = "m:_hash"
        self.cur.execute(f"INSERT IGNORE INTO {T} (session_id, state_key, item_index, state_data, version) VALUES "
                         "(%s,%s,0,%s,1)", (sid, hk, self._hash_text(sid, 0)))
        self.con.commit()

        def op():
            self.cur.execute(f"SELECT state_data, GREATEST(version, 1) FROM {T} WHERE session_id=%s AND state_key=%s"
                             " AND item_index=0 FOR UPDATE", (sid, hk))
            self.cur.fetchone()
            new = self._hash_text(sid, self.n.get(sid, 1000))
            rows = [(sid, "m", self._next(sid), self.msg), (sid, hk, 0, new), (CAT, sid, 0, "{}")]
            self.cur.execute(f"INSERT INTO {T} (session_id, state_key, item_index, state_data, version) VALUES "
                             + ",".join(["(%s,%s,%s,%s,1)"] * 3)
                             + " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = version + 1",
                             [x for r in rows for x in r])
            self.con.commit()
        return op

    def close(self) -> None:
        self.con.close()


def writes(kwargs: dict) -> None:
    w = Writes(kwargs)
    ops = {
        "floor: INSERT 1 row + COMMIT": w.floor(1),
        "today's append: hash row (text compare) + item + catalog": w.append("a1", catalog=True, by_version=False),
        "append, no catalog row": w.append("a2", catalog=False, by_version=False),
        "append, version compare": w.append("a3", catalog=True, by_version=True),
        "append, version compare, no catalog row": w.append("a4", catalog=False, by_version=True),
        "locked: SELECT FOR UPDATE + write + COMMIT": w.locked_append("a5"),
    }
    show("A1. one message appended (statement shapes)", interleaved(ops, 300), "floor: INSERT 1 row + COMMIT")
    ops = {
        "floor turn write: INSERT 2 rows + COMMIT": w.floor(2),
        "list (2 items + hash + catalog) and value in ONE statement + COMMIT":
            w.append("b1", catalog=True, by_version=False, value=True, items=2),
        "list statement + value statement + COMMIT": _two(w, "b2"),
    }
    show("A2. an AgentScope save's writes (statement shapes)", interleaved(ops, 300),
         "floor turn write: INSERT 2 rows + COMMIT")
    w.close()


def _two(w: Writes, sid: str):
    lst = w.append(sid, catalog=True, by_version=False, items=2)
    cur, con = w.cur, w.con
    text = '{"summary": "' + "s" * 200 + '", "turns": 1}'
    real_commit = con.commit

    def op():
        con.commit = lambda: None  # the list statement's COMMIT is deferred to after the value
        try:
            lst()
        finally:
            con.commit = real_commit
        cur.execute(f"INSERT INTO {T} (session_id, state_key, item_index, state_data, version) VALUES"
                    " (%s,'state',0,%s,1) ON DUPLICATE KEY UPDATE state_data = VALUES(state_data),"
                    " version = LAST_INSERT_ID(version + 1)", (sid, text))
        con.commit()
    return op


def reads(url: str, kwargs: dict) -> None:
    store = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True)
    con = pymysql.connect(charset="utf8mb4", autocommit=True, database=DB, **kwargs)
    cur = con.cursor()
    for n in (10, 100):
        store.save_list("u", f"r{n}", "m", data.Conversation(n).base)
        sid = f"u:r{n}"
        today = (f"(SELECT state_data FROM {T} WHERE session_id = %s AND state_key = %s ORDER BY item_index"
                 " LIMIT 4611686018427387904) UNION ALL"
                 " (SELECT CONCAT(CHAR(31), GREATEST(version, 1), ',',"
                 f" COALESCE((SELECT MIN(item_index) FROM {T} WHERE session_id = %s AND state_key = %s), ''), ',',"
                 f" COALESCE((SELECT MAX(item_index) FROM {T} WHERE session_id = %s AND state_key = %s), ''), CHAR(31),"
                 f" state_data) FROM {T} WHERE session_id = %s AND state_key = %s AND item_index = 0)")
        two_col = (f"(SELECT item_index, state_data FROM {T} WHERE session_id = %s AND state_key = %s"
                   f" ORDER BY item_index LIMIT 4611686018427387904) UNION ALL (SELECT -1 - GREATEST(version, 1),"
                   f" state_data FROM {T} WHERE session_id = %s AND state_key = %s AND item_index = 0)")
        bare = f"SELECT state_data FROM {T} WHERE session_id = %s AND state_key = %s ORDER BY item_index"
        loads = orjson.loads

        def run(sql, params, col):
            cur.execute(sql, params)
            rows = cur.fetchall()
            if col == 0 and rows and rows[-1][0].startswith("\x1f"):
                rows = rows[:-1]
            return [loads(r[col]) for r in rows]

        ops = {
            "bare SELECT + loads": lambda: run(bare, (sid, "m"), 0),
            "today's statement (raw) + loads": lambda: run(today, (sid, "m", sid, "m", sid, "m", sid, "m:_hash"), 0),
            "items with index + hash row (no MIN/MAX subqueries) + loads":
                lambda: run(two_col, (sid, "m", sid, "m:_hash"), 1),
            "store.get_list": lambda: store.get_list("u", f"r{n}", "m"),
        }
        show(f"B. get_list N={n}", interleaved(ops, 400), "bare SELECT + loads")
    store.close()
    con.close()


def opener_proto() -> None:
    ring = Keyring({"k1": os.urandom(32)}, current="k1")
    cipher = RowCipher(ring, "`db`.`t`")
    base = data.Conversation(10000).base
    sealed = [cipher.seal("u:s", "m", i, orjson.dumps(m)).decode() for i, m in enumerate(base)]
    sealed_b = [s.encode() for s in sealed]
    today = cipher.opener("u:s", "m")
    aead = ring.aead("k1")
    head = PREFIX + "k1:"
    hl = len(head)
    prefix = b"`db`.`t`\0u:s\0m\0"
    a2b = base64.b64decode

    def lean(texts):
        out = []
        dec = aead.decrypt
        for i, t in enumerate(texts):
            if t.startswith(head):
                raw = a2b(t[hl:])
                mv = memoryview(raw)
                out.append(dec(mv[:12], mv[12:], prefix + str(i).encode()))
            else:
                out.append(today(i, t))
        return out

    headb = head.encode()

    def lean_bytes(texts):
        out = []
        dec = aead.decrypt
        import binascii
        b = binascii.a2b_base64
        for i, t in enumerate(texts):
            if t.startswith(headb):
                raw = b(memoryview(t)[hl:])
                out.append(dec(raw[:12], raw[12:], prefix + b"%d" % i))
            else:
                out.append(today(i, t.decode()))
        return out

    raws = [a2b(t[hl:]) for t in sealed]
    aads = [prefix + str(i).encode() for i in range(len(sealed))]
    ops = {
        "base64 decode only": lambda: [a2b(t[hl:]) for t in sealed],
        "AES-GCM decrypt only": lambda: [aead.decrypt(r[:12], r[12:], a) for r, a in zip(raws, aads)],
    }
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV  # noqa: F401
    except ImportError:
        pass
    show("C0. the parts of opening 10 000 rows", interleaved(ops, 15))
    assert lean(sealed) == [today(i, t) for i, t in enumerate(sealed)] == lean_bytes(sealed_b)
    plain = [orjson.dumps(m).decode() for m in base]
    loads = orjson.loads
    ops = {
        "plain: orjson.loads per row": lambda: [loads(t) for t in plain],
        "today's opener + loads": lambda: [loads(today(i, t)) for i, t in enumerate(sealed)],
        "lean opener (str rows) + loads": lambda: [loads(x) for x in lean(sealed)],
        "lean opener (bytes rows: CAST AS BINARY) + loads": lambda: [loads(x) for x in lean_bytes(sealed_b)],
    }
    show("C. opening 10 000 sealed rows (CPU only, no SQL)", interleaved(ops, 15), "plain: orjson.loads per row")


def digests() -> None:
    try:
        import blake3
    except ImportError:
        print("no blake3\n")
        return
    for n in (1000, 10000):
        l2 = data.Conversation(n).base + data.Conversation(n).turn2
        blob = orjson.dumps(l2)
        remembered = hashlib.sha256(memoryview(blob)[1:len(blob) - 2200])
        remembered3 = blake3.blake3(memoryview(blob)[1:len(blob) - 2200])
        ops = {
            "orjson.dumps(list)": lambda: orjson.dumps(l2),
            "SHA-256 of the prefix": lambda: hashlib.sha256(memoryview(blob)[1:-540]).digest(),
            "BLAKE3 of the prefix": lambda: blake3.blake3(memoryview(blob)[1:-540]).digest(),
            "memcmp with the remembered blob": lambda: blob.startswith(memoryview(blob)[: len(blob) - 2200]),
            "remembered SHA-256 state + 4 items": lambda: (lambda h: (h.update(memoryview(blob)[len(blob) - 2200:-540]),
                                                                       h.digest()))(remembered.copy()),
            "remembered BLAKE3 state + 4 items": lambda: (lambda h: (h.update(memoryview(blob)[len(blob) - 2200:-540]),
                                                                      h.digest()))(remembered3.copy()),
        }
        show(f"D. digests, N={n} ({len(blob) / 1e6:.1f} MB)", interleaved(ops, 40), "orjson.dumps(list)")


def main() -> None:
    url, kwargs = harness.server()
    admin = pymysql.connect(autocommit=True, charset="utf8mb4", **kwargs)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
    MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True).close()
    import sys
    parts = sys.argv[1:] or ["digests", "opener", "writes", "reads"]
    try:
        if "digests" in parts:
            digests()
        if "opener" in parts:
            opener_proto()
        if "writes" in parts:
            writes(kwargs)
        if "reads" in parts:
            reads(url, kwargs)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")


if __name__ == "__main__":
    main()
