"""Baselines written for the benchmark, on plain pymysql connections (no pool).

* :class:`Floor`: the physical floor, one INSERT of the bytes + COMMIT; one ``SELECT 1``; a bare
  ``SELECT ... ORDER BY item_index`` + ``orjson.loads`` per row.
* :class:`JavaReplica`: the algorithm of AgentScope Java's ``MysqlAgentStateStore`` list save,
  re-implemented from its description: a hash of the list sampled at 5 positions (size included),
  ``SELECT MAX(item_index)`` for the stored length, a full rewrite when the sampled hash of the
  stored prefix differs or the list shrank, else an INSERT of the new items, then a separate
  upsert of the hash row, then COMMIT. Batches are multi-row INSERTs (as Connector/J with
  ``rewriteBatchedStatements=true``, the most generous setting), autocommit is already off
  (no ``SET autocommit`` round trips).
* :class:`NaiveStore`: rewrites the whole list every turn (DELETE + INSERT of every item).
* :class:`BlobStore`: the whole session as one JSON row (what frameworks that dump the whole agent
  state each turn do).
"""

from __future__ import annotations

import hashlib

import orjson
import pymysql

MAX_STATEMENT = 4 * 1024 * 1024

LIST_TABLE = (
    "CREATE TABLE IF NOT EXISTS {t} ("
    " session_id VARCHAR(255) NOT NULL, state_key VARCHAR(255) NOT NULL,"
    " item_index INT NOT NULL DEFAULT 0, state_data LONGTEXT NOT NULL,"
    " version BIGINT NOT NULL DEFAULT 0, created_at DATETIME DEFAULT CURRENT_TIMESTAMP,"
    " updated_at DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,"
    " PRIMARY KEY (session_id, state_key, item_index)"
    ") DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
)


def connect(kwargs: dict, database: str, autocommit: bool) -> pymysql.connections.Connection:
    return pymysql.connect(charset="utf8mb4", autocommit=autocommit, database=database, **kwargs)


def insert_rows(cur, table: str, sid: str, key: str, rows: list[tuple[int, str]], upsert: bool = False) -> None:
    """Multi-row INSERTs of (index, json text), each statement under MAX_STATEMENT bytes."""
    head = f"INSERT INTO {table} (session_id, state_key, item_index, state_data) VALUES "
    tail = " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)" if upsert else ""
    parts: list[str] = []
    params: list = []
    size = 0
    for index, data in rows:
        if parts and size + len(data) > MAX_STATEMENT:
            cur.execute(head + ",".join(parts) + tail, params)
            parts, params, size = [], [], 0
        parts.append("(%s,%s,%s,%s)")
        params += (sid, key, index, data)
        size += len(data) + 64
    if parts:
        cur.execute(head + ",".join(parts) + tail, params)


def select_items(con, table: str, sid: str, key: str) -> list:
    """Bare ``SELECT state_data ... ORDER BY item_index`` + ``orjson.loads`` per row."""
    with con.cursor() as cur:
        cur.execute(
            f"SELECT state_data FROM {table} WHERE session_id = %s AND state_key = %s ORDER BY item_index",
            (sid, key),
        )
        rows = cur.fetchall()
    loads = orjson.loads
    return [loads(r[0]) for r in rows]


def rewrite(con, table: str, sid: str, key, rows: dict) -> None:
    """DELETE the session's rows (of ``key`` only, unless it is None), INSERT ``rows`` ({key:
    [(index, json text)]}), COMMIT; rolled back on error."""
    try:
        with con.cursor() as cur:
            if key is None:
                cur.execute(f"DELETE FROM {table} WHERE session_id = %s", (sid,))
            else:
                cur.execute(f"DELETE FROM {table} WHERE session_id = %s AND state_key = %s", (sid, key))
            for k, items in rows.items():
                insert_rows(cur, table, sid, k, items)
        con.commit()
    except BaseException:
        con.rollback()
        raise


class Floor:
    """The physical floor: what the bytes alone cost on this server and network."""

    def __init__(self, kwargs: dict, database: str) -> None:
        self.table = f"`{database}`.`floor_rows`"
        self.wcon = connect(kwargs, database, autocommit=False)
        self.rcon = connect(kwargs, database, autocommit=True)
        with self.wcon.cursor() as cur:
            cur.execute(LIST_TABLE.replace("{t}", self.table))
        self.wcon.commit()
        self._next = 0
        self._sid = f"floor-{id(self)}"
        self._insert_cache: dict[int, str] = {}

    def insert(self, texts: list[str]) -> None:
        """One INSERT carrying these JSON texts (fresh rows each time) + COMMIT."""
        n = len(texts)
        stmt = self._insert_cache.get(n)
        if stmt is None:
            stmt = f"INSERT INTO {self.table} (session_id, state_key, item_index, state_data) VALUES " + ",".join(
                ["(%s,%s,%s,%s)"] * n
            )
            self._insert_cache[n] = stmt
        params = []
        for t in texts:
            self._next += 1
            params += (self._sid, "rows", self._next, t)
        with self.wcon.cursor() as cur:
            cur.execute(stmt, params)
        self.wcon.commit()

    def upsert_value(self, sid: str, text: str) -> None:
        """One upsert of a single value's bytes + COMMIT (the floor of ``save``)."""
        with self.wcon.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self.table} (session_id, state_key, item_index, state_data) VALUES (%s,'value',0,%s)"
                " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                (sid, text),
            )
        self.wcon.commit()

    def append_rows(self, sid: str, key: str, start: int, texts: list[str]) -> None:
        """One INSERT of these JSON texts at ``start``, ``start + 1``... of a list + COMMIT."""
        with self.wcon.cursor() as cur:
            insert_rows(cur, self.table, sid, key, list(enumerate(texts, start)))
        self.wcon.commit()

    def replace_rows(self, sid: str, key: str, texts: list[str]) -> None:
        """Untimed reset: the list is exactly these JSON texts."""
        rewrite(self.wcon, self.table, sid, key, {key: list(enumerate(texts))})

    def select1(self) -> None:
        with self.rcon.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()

    def select_list(self, table: str, sid: str, key: str) -> list:
        """Bare ``SELECT ... ORDER BY item_index`` + ``orjson.loads`` per row."""
        return select_items(self.rcon, table, sid, key)

    def select_tail(self, table: str, sid: str, key: str, n: int) -> list:
        with self.rcon.cursor() as cur:
            cur.execute(
                f"SELECT state_data FROM {table} WHERE session_id = %s AND state_key = %s"
                " ORDER BY item_index DESC LIMIT %s",
                (sid, key, n),
            )
            rows = cur.fetchall()
        loads = orjson.loads
        return [loads(r[0]) for r in reversed(rows)]

    def select_value(self, table: str, sid: str, key: str):
        with self.rcon.cursor() as cur:
            cur.execute(
                f"SELECT state_data FROM {table} WHERE session_id = %s AND state_key = %s AND item_index = 0",
                (sid, key),
            )
            row = cur.fetchone()
        return orjson.loads(row[0])

    def close(self) -> None:
        self.wcon.close()
        self.rcon.close()


def sampled_hash(jsons_at, n: int) -> str:
    """Hash of the size and the items at 5 sampled positions; ``jsons_at(i)`` gives item i's JSON."""
    if n == 0:
        return "empty:0"
    h = hashlib.sha256(f"size:{n};".encode())
    for p in sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1}):
        h.update(f"{p}:".encode())
        h.update(jsons_at(p))
        h.update(b",")
    return h.hexdigest()


class JavaReplica:
    """The Java store's list algorithm (see the module doc), one connection."""

    def __init__(self, kwargs: dict, database: str) -> None:
        self.table = f"`{database}`.`java_sessions`"
        self.con = connect(kwargs, database, autocommit=False)
        self.rcon = connect(kwargs, database, autocommit=True)
        with self.con.cursor() as cur:
            cur.execute(LIST_TABLE.replace("{t}", self.table))
        self.con.commit()

    def save_list(self, sid: str, key: str, values: list) -> None:
        t = self.table
        hk = key + ":_hash"
        dumps = orjson.dumps
        cache: dict[int, bytes] = {}

        def at(i: int) -> bytes:
            d = cache.get(i)
            if d is None:
                d = cache[i] = dumps(values[i])
            return d

        try:
            with self.con.cursor() as cur:
                cur.execute(
                    f"SELECT state_data FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = 0", (sid, hk)
                )
                row = cur.fetchone()
                stored = row[0] if row else None
                cur.execute(f"SELECT MAX(item_index) FROM {t} WHERE session_id = %s AND state_key = %s", (sid, key))
                mx = cur.fetchone()[0]
                existing = 0 if mx is None else int(mx) + 1
                current = sampled_hash(at, len(values))
                rewrite = (
                    len(values) < existing
                    or (stored is None and existing > 0)
                    or (stored is not None and sampled_hash(at, existing) != stored)
                )
                if rewrite:
                    cur.execute(f"DELETE FROM {t} WHERE session_id = %s AND state_key = %s", (sid, key))
                    insert_rows(cur, t, sid, key, [(i, at(i).decode()) for i in range(len(values))])
                elif len(values) > existing:
                    insert_rows(cur, t, sid, key, [(i, at(i).decode()) for i in range(existing, len(values))])
                else:
                    self.con.commit()
                    return
                cur.execute(
                    f"INSERT INTO {t} (session_id, state_key, item_index, state_data) VALUES (%s, %s, 0, %s)"
                    " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                    (sid, hk, current),
                )
            self.con.commit()
        except BaseException:
            self.con.rollback()
            raise

    def save(self, sid: str, key: str, value) -> None:
        with self.con.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self.table} (session_id, state_key, item_index, state_data, version)"
                " VALUES (%s, %s, 0, %s, 1)"
                " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data), version = version + 1",
                (sid, key, orjson.dumps(value).decode()),
            )
        self.con.commit()

    def get(self, sid: str, key: str):
        with self.rcon.cursor() as cur:
            cur.execute(
                f"SELECT state_data FROM {self.table} WHERE session_id = %s AND state_key = %s AND item_index = 0",
                (sid, key),
            )
            row = cur.fetchone()
        return orjson.loads(row[0]) if row else None

    def get_list(self, sid: str, key: str) -> list:
        return select_items(self.rcon, self.table, sid, key)

    def restore(self, sid: str, key: str, base: list, start: int) -> None:
        """Untimed reset: make the stored list ``base`` again, rewriting from ``start``."""
        with self.con.cursor() as cur:
            cur.execute(
                f"DELETE FROM {self.table} WHERE session_id = %s AND state_key = %s AND item_index >= %s",
                (sid, key, start),
            )
            insert_rows(cur, self.table, sid, key, [(i, orjson.dumps(base[i]).decode()) for i in range(start, len(base))])
            h = sampled_hash(lambda i: orjson.dumps(base[i]), len(base))
            cur.execute(
                f"INSERT INTO {self.table} (session_id, state_key, item_index, state_data) VALUES (%s, %s, 0, %s)"
                " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                (sid, key + ":_hash", h),
            )
        self.con.commit()

    def close(self) -> None:
        self.con.close()
        self.rcon.close()


class NaiveStore:
    """Rewrites the whole list on every save: DELETE, INSERT every item, COMMIT."""

    def __init__(self, kwargs: dict, database: str) -> None:
        self.table = f"`{database}`.`naive_sessions`"
        self.con = connect(kwargs, database, autocommit=False)
        self.rcon = connect(kwargs, database, autocommit=True)
        with self.con.cursor() as cur:
            cur.execute(LIST_TABLE.replace("{t}", self.table))
        self.con.commit()

    def save_list(self, sid: str, key: str, values: list) -> None:
        dumps = orjson.dumps
        rewrite(self.con, self.table, sid, key, {key: [(i, dumps(v).decode()) for i, v in enumerate(values)]})

    def save_session(self, sid: str, lists: dict, values: dict) -> None:
        """The whole session rewritten: DELETE all its rows, INSERT every item and value, COMMIT."""
        dumps = orjson.dumps
        rows = {k: [(i, dumps(v).decode()) for i, v in enumerate(vs)] for k, vs in lists.items()}
        rows.update((k, [(0, dumps(v).decode())]) for k, v in values.items())
        rewrite(self.con, self.table, sid, None, rows)

    def load_session(self, sid: str, lists: tuple = ()) -> dict:
        """Every key of the session in one SELECT: the keys in ``lists`` as lists, others as values."""
        with self.rcon.cursor() as cur:
            cur.execute(
                f"SELECT state_key, state_data FROM {self.table} WHERE session_id = %s ORDER BY state_key, item_index",
                (sid,),
            )
            rows = cur.fetchall()
        out: dict = {k: [] for k in lists}
        loads = orjson.loads
        for k, data in rows:
            if k in lists:
                out[k].append(loads(data))
            else:
                out[k] = loads(data)
        return out

    def close(self) -> None:
        self.con.close()
        self.rcon.close()


class BlobStore:
    """The whole session state as one JSON row, upserted every turn."""

    def __init__(self, kwargs: dict, database: str) -> None:
        self.table = f"`{database}`.`blob_sessions`"
        self.con = connect(kwargs, database, autocommit=False)
        self.rcon = connect(kwargs, database, autocommit=True)
        with self.con.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (session_id VARCHAR(255) NOT NULL PRIMARY KEY,"
                " state_data LONGTEXT NOT NULL) DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        self.con.commit()

    def save(self, sid: str, state: dict) -> None:
        data = orjson.dumps(state).decode()
        with self.con.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self.table} (session_id, state_data) VALUES (%s, %s)"
                " ON DUPLICATE KEY UPDATE state_data = VALUES(state_data)",
                (sid, data),
            )
        self.con.commit()

    def load(self, sid: str) -> dict:
        with self.rcon.cursor() as cur:
            cur.execute(f"SELECT state_data FROM {self.table} WHERE session_id = %s", (sid,))
            row = cur.fetchone()
        return orjson.loads(row[0])

    def close(self) -> None:
        self.con.close()
        self.rcon.close()
