"""MysqlAgentStateStore: the synchronous store, and the source of truth for the async one."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from . import keys, listsync, serde, sql
from .errors import DUPLICATE_KEY, MysqlStateWarning, SchemaNotFoundError, ValueTooLargeError, errno_of
from .listsync import ListHash, Plan, Snapshot, SnapshotCache
from .pool import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_RETRIES,
    DEFAULT_WRITE_TIMEOUT,
    Connector,
    Stats,
    make_pools,
)

__all__ = ["MysqlAgentStateStore", "VersionedState", "UNVERSIONED"]

#: ``save_if_version``'s "nothing written", and its "overwrite whatever is there" argument.
UNVERSIONED = -1
DEFAULT_SNAPSHOT_BYTES = 64 * 1024 * 1024
_NO_LIMIT = 1 << 62
_WARNED: set[tuple[str, str]] = set()


class VersionedState(NamedTuple):
    """A value with the version of its row (0 when absent)."""

    value: Any
    version: int


@dataclass
class _ListWrite:
    """One list save, validated and encoded, on its way into a transaction."""

    sid: str
    key: str
    values: Sequence[Any]
    blob: bytes
    snapshot: Optional[Snapshot]
    new_snapshot: Optional[Snapshot] = None

    def lock(self) -> Any:
        return self.lock_of(self.snapshot)

    @staticmethod
    def lock_of(snapshot: Optional[Snapshot]) -> Any:
        """One writer per list key in this process while its snapshot is in use."""
        return snapshot.lock if snapshot is not None else contextlib.nullcontext()


class MysqlAgentStateStore:
    """Agent state in one MySQL table, readable by AgentScope Java's ``MysqlAgentStateStore``.

    A single value is one row at ``item_index = 0``; a list is one row per item plus a
    ``"<key>:_hash"`` row used for change detection. ``(user_id, session_id)`` is packed as
    ``"<user>:<session>"`` (``__anon__`` when the user is None or blank).

    >>> store = MysqlAgentStateStore.from_url(url, create_if_not_exist=True)  # doctest: +SKIP
    >>> store.save_list("alice", "chat-1", "memory", [{"role": "user", "text": "hi"}])
    >>> store.get_list("alice", "chat-1", "memory")
    [{'role': 'user', 'text': 'hi'}]
    """

    supports_versioning = True

    def __init__(
        self,
        pool: Any,
        database_name: Optional[str] = None,
        table_name: Optional[str] = None,
        create_if_not_exist: bool = False,
        *,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
        _read_pool: Any = None,
        _owned: bool = False,
        _pool_size: Optional[int] = None,
    ) -> None:
        """Use ``pool`` (a DBUtils ``PooledDB`` of pymysql connections, or anything with
        ``.connection()``); the store never closes a pool it was given.

        ``pool_timeout`` bounds the wait for a free connection, ``retries`` the retries of a
        transaction that hit a lock conflict, ``snapshot_bytes`` the memory for the
        per-process list snapshots that make ``save_list`` cheap (0 turns them off).
        """
        self.database_name = keys.identifier(database_name, "database name", keys.DEFAULT_DATABASE)
        self.table_name = keys.identifier(table_name, "table name", keys.DEFAULT_TABLE)
        self._db = Connector(
            pool,
            read_pool=_read_pool,
            owned=_owned,
            pool_size=_pool_size,
            pool_timeout=pool_timeout,
            retries=retries,
        )
        #: Connections per pool (None for a given pool); the async store sizes its threads to it.
        self.pool_size: Optional[int] = _pool_size
        self._snapshots = SnapshotCache(snapshot_bytes)
        self._table = keys.quote_table(self.database_name, self.table_name)
        try:
            self._setup(create_if_not_exist)
        except BaseException:
            self._db.close()
            raise
        q = lambda template: sql.render(template, self._table, self.collation)  # noqa: E731
        self._sql = {name: q(getattr(sql, name)) for name in dir(sql) if name.isupper() and isinstance(getattr(sql, name), str)}
        self._upsert = (self._sql["UPSERT_ROWS_HEAD"], self._sql["UPSERT_ROWS_TAIL"])

    @classmethod
    def from_url(
        cls,
        url: str,
        database_name: Optional[str] = None,
        table_name: Optional[str] = None,
        create_if_not_exist: bool = False,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
        **connect_kwargs: Any,
    ) -> "MysqlAgentStateStore":
        """A store with its own pools, closed by :meth:`close`.

        ``url`` is ``mysql://user:password@host:port/database``; the path's database is used
        unless ``database_name`` is given; ``?unix_socket=/path`` connects through a socket.
        Other keywords go to ``pymysql.connect``.

        >>> with MysqlAgentStateStore.from_url("mysql://root@127.0.0.1:3306/agentscope") as s:
        ...     s.exists("alice", "chat-1")  # doctest: +SKIP
        False
        """
        write_pool, read_pool, url_database = make_pools(
            url,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            **connect_kwargs,
        )
        chosen = database_name if database_name is not None and database_name.strip() else url_database
        return cls(
            write_pool,
            chosen,
            table_name,
            create_if_not_exist,
            pool_timeout=pool_timeout,
            retries=retries,
            snapshot_bytes=snapshot_bytes,
            _read_pool=read_pool,
            _owned=True,
            _pool_size=pool_size,
        )

    # ---- schema ------------------------------------------------------------------------------

    def _setup(self, create: bool) -> None:
        db, table = self.database_name, self.table_name

        def setup(cur: Any) -> None:
            cur.execute(sql.AVAILABLE_COLLATIONS, (*sql.EXACT_COLLATIONS, sql.PAD_COLLATION))
            have = {r[0] for r in cur.fetchall()}
            self.collation = next((c for c in sql.EXACT_COLLATIONS if c in have), sql.PAD_COLLATION)
            cur.execute(sql.MAX_ALLOWED_PACKET)
            self.max_allowed_packet = int(cur.fetchone()[0])
            create_table = sql.render(sql.CREATE_TABLE, self._table, self.collation)
            if create:
                cur.execute(sql.CREATE_DATABASE.replace("{db}", db))
                cur.execute(create_table)
            else:
                cur.execute(sql.SCHEMA_EXISTS, (db,))
                if cur.fetchone() is None:
                    raise SchemaNotFoundError(
                        f"database `{db}` does not exist. Create it with "
                        f"{sql.CREATE_DATABASE.replace('{db}', db)}; and then {create_table}; "
                        "or pass create_if_not_exist=True"
                    )
                cur.execute(sql.TABLE_EXISTS, (db, table))
                if cur.fetchone() is None:
                    raise SchemaNotFoundError(
                        f"table `{db}`.`{table}` does not exist. Create it with {create_table}; "
                        "or pass create_if_not_exist=True"
                    )
            cur.execute(sql.TABLE_COLUMNS, (db, table))
            columns = dict(cur.fetchall())
            if "version" not in columns:
                cur.execute(sql.render(sql.ADD_VERSION_COLUMN, self._table))
            key_collations = {columns.get("session_id"), columns.get("state_key")}
            self.exact_keys = key_collations <= set(sql.EXACT_COLLATIONS)
            self.pads_spaces = not self.exact_keys  # conservative: refuse trailing spaces then
            if not self.exact_keys and (db, table) not in _WARNED:
                _WARNED.add((db, table))
                fix = sql.render(sql.MAKE_KEYS_EXACT, self._table, self.collation)
                warnings.warn(
                    f"table `{db}`.`{table}` compares session_id/state_key with collation "
                    f"{sorted(c or '?' for c in key_collations)}, which is not exact (case or "
                    f"trailing spaces): ids that differ only so would share rows. Make it exact "
                    f"with: {fix}",
                    MysqlStateWarning,
                    stacklevel=4,
                )

        self._db.run(setup, f"open table `{db}`.`{table}`", write=True)

    # ---- helpers -------------------------------------------------------------------------------

    def _ids(self, user_id: Optional[str], session_id: str, key: Optional[str] = None, *, is_list=False):
        sid = keys.pack(user_id, session_id)
        k = keys.state_key(key, is_list=is_list) if key is not None else None
        if self.pads_spaces:
            for what, v in (("user_id", user_id or ""), ("session_id", session_id), ("key", k or "")):
                if v.endswith(" "):
                    raise ValueError(
                        f"{what} {v!r} ends with a space, and this table's collation ignores "
                        "trailing spaces (so it would share a row with the trimmed id); make the "
                        "key columns exact (see the warning at open) to allow it"
                    )
        return sid, k

    def _check_size(self, data: bytes, what: str) -> None:
        need = sql.escaped_size(data) + 2 * 4 * 2 * keys.MAX_ID_CHARS + 256
        if need > self.max_allowed_packet:
            raise ValueTooLargeError(
                f"{what}: the value's JSON is {len(data)} bytes ({need} bytes in the statement), "
                f"more than the server's max_allowed_packet of {self.max_allowed_packet} bytes; "
                "nothing was written"
            )

    def _write_rows(self, cur: Any, sid: str, rows: list[tuple[str, int, bytes]]) -> None:
        limit = self.max_allowed_packet - 1024
        for statement, params in sql.upsert_rows(self._upsert, sid, rows, limit):
            cur.execute(statement, params)

    def _write_list(
        self, cur: Any, sid: str, k: str, items: list[tuple[int, bytes]], new_hash: ListHash, hash_row_exists: bool
    ) -> None:
        """Items and the hash row; in the same multi-row upsert when the hash row exists.

        A list that has no hash row yet gets it by a plain INSERT, first: of two writers
        racing to create one list, the second waits on the first's row and then fails with
        1062 (duplicate key), and its whole transaction is retried against the created list.
        """
        rows = [(k, i, d) for i, d in items]
        if hash_row_exists:
            rows.append((keys.hash_key(k), 0, new_hash.to_json()))
        else:
            cur.execute(self._sql["INSERT_HASH_ROW"], (sid, keys.hash_key(k), new_hash.to_json().decode()))
        self._write_rows(cur, sid, rows)

    # ---- single values -------------------------------------------------------------------------

    def save(self, user_id: Optional[str], session_id: str, key: str, value: Any) -> None:
        """Store one value at ``key`` (upsert; its version grows by one).

        >>> store.save("alice", "chat-1", "summary", {"text": "talked about MySQL"})  # doctest: +SKIP
        """
        self._save_value(user_id, session_id, key, value)

    def _save_value(self, user_id, session_id, key, value) -> int:
        sid, k, text = self._prepare_value(user_id, session_id, key, value)
        version = self._db.run(lambda cur: self._value_tx(cur, sid, k, text), f"save {k!r}", write=True)
        self._snapshots.drop((sid, k))
        return version

    def _prepare_value(self, user_id, session_id, key, value) -> tuple[str, str, str]:
        """Validate and encode before any SQL: (packed session id, key, JSON text)."""
        sid, k = self._ids(user_id, session_id, key)
        data = serde.encode(value, k)
        self._check_size(data, f"save {k!r}")
        return sid, k, data.decode()

    def _value_tx(self, cur: Any, sid: str, k: str, text: str) -> int:
        """Upsert one value (removing what a list left under the key); returns its version."""
        cur.execute(self._sql["DELETE_LIST_REMAINS"], (sid, k, keys.hash_key(k)))
        affected = cur.execute(self._sql["UPSERT_VALUE"], (sid, k, text))
        return 1 if affected == 1 else int(cur.lastrowid)

    def get(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        default: Any = None,
    ) -> Any:
        """The value at ``key`` (an instance of ``type`` when given), or ``default``.

        >>> store.get("alice", "chat-1", "summary")  # doctest: +SKIP
        {'text': 'talked about MySQL'}
        """
        found = self.get_versioned(user_id, session_id, key, type)
        return default if found.version == 0 and found.value is None else found.value

    def get_versioned(
        self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None
    ) -> VersionedState:
        """The value and its version; ``(None, 0)`` when absent.

        >>> value, version = store.get_versioned("alice", "chat-1", "plan")  # doctest: +SKIP
        """
        sid, k = self._ids(user_id, session_id, key)

        def read(cur: Any) -> Optional[tuple]:
            cur.execute(self._sql["SELECT_VALUE"], (sid, k))
            return cur.fetchone()

        row = self._db.run(read, f"get {k!r}", write=False)
        if row is None:
            return VersionedState(None, 0)
        return VersionedState(serde.decode(row[0], type), int(row[1]))

    def save_if_version(
        self, user_id: Optional[str], session_id: str, key: str, value: Any, expected_version: int
    ) -> int:
        """Compare-and-set: write only if the stored version is ``expected_version``.

        ``0`` creates the key if absent; ``UNVERSIONED`` (-1) overwrites unconditionally.
        Returns the new version, or ``UNVERSIONED`` when nothing was written.

        >>> v = store.save_if_version("alice", "chat-1", "plan", {"step": 1}, 0)  # doctest: +SKIP
        >>> store.save_if_version("alice", "chat-1", "plan", {"step": 2}, v)  # doctest: +SKIP
        2
        """
        if not isinstance(expected_version, int) or isinstance(expected_version, bool):
            raise TypeError(f"expected_version must be an int, got {expected_version!r}")
        if expected_version < UNVERSIONED:
            raise ValueError(f"expected_version {expected_version} must be >= -1 (UNVERSIONED)")
        if expected_version == UNVERSIONED:
            return self._save_value(user_id, session_id, key, value)
        sid, k, text = self._prepare_value(user_id, session_id, key, value)

        def tx(cur: Any) -> int:
            if expected_version == 0:
                try:
                    cur.execute(self._sql["INSERT_VALUE"], (sid, k, text))
                except Exception as exc:
                    if errno_of(exc) == DUPLICATE_KEY:  # the key exists: not ours to create
                        return UNVERSIONED
                    raise
                return 1
            updated = cur.execute(self._sql["UPDATE_IF_VERSION"], (text, sid, k, expected_version))
            return expected_version + 1 if updated == 1 else UNVERSIONED

        version = self._db.run(tx, f"save_if_version {k!r}", write=True)
        if version != UNVERSIONED:
            self._snapshots.drop((sid, k))
        return version

    # ---- lists ---------------------------------------------------------------------------------

    def save_list(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any]) -> None:
        """Store the whole list at ``key``, writing only the items that changed.

        An empty list clears it; a shorter list removes the rows past its end.

        >>> store.save_list("alice", "chat-1", "memory", messages)  # doctest: +SKIP
        """
        self.save_list_report(user_id, session_id, key, values)

    def save_list_report(
        self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any]
    ) -> Plan:
        """:meth:`save_list`, returning what it wrote (kind of save, rows written)."""
        w = self._prepare_list(user_id, session_id, key, values)
        with w.lock():
            plan = self._db.run(lambda cur: self._list_tx(cur, w), f"save_list {w.key!r}", write=True)
        self._snapshots.put((w.sid, w.key), w.new_snapshot)
        return plan

    def save_many(
        self,
        user_id: Optional[str],
        session_id: str,
        values: Optional[Mapping[str, Any]] = None,
        lists: Optional[Mapping[str, Sequence[Any]]] = None,
    ) -> dict[str, Plan]:
        """Save several values and lists of one session in ONE transaction (all or nothing).

        Lists are saved as :meth:`save_list` does (only what changed); returns each list's plan.

        >>> store.save_many("alice", "chat-1", values={"summary": s}, lists={"context": msgs})  # doctest: +SKIP
        """
        values, lists = dict(values or {}), dict(lists or {})
        both = set(values) & set(lists)
        if both:
            raise ValueError(f"keys {sorted(both)} are given both as a value and as a list")
        writes = [self._prepare_list(user_id, session_id, k, v) for k, v in sorted(lists.items())]
        prepared = [self._prepare_value(user_id, session_id, k, v) for k, v in sorted(values.items())]

        def tx(cur: Any) -> dict[str, Plan]:
            plans = {w.key: self._list_tx(cur, w) for w in writes}
            for sid, k, text in prepared:
                self._value_tx(cur, sid, k, text)
            return plans

        with contextlib.ExitStack() as stack:
            for w in writes:
                stack.enter_context(w.lock())
            plans = self._db.run(tx, f"save_many {sorted(lists) + sorted(values)}", write=True)
        for w in writes:
            self._snapshots.put((w.sid, w.key), w.new_snapshot)
        for sid, k, _ in prepared:
            self._snapshots.drop((sid, k))
        return plans

    def _prepare_list(self, user_id, session_id, key, values) -> "_ListWrite":
        """Validate and encode a list save before any SQL."""
        sid, k = self._ids(user_id, session_id, key, is_list=True)
        if not isinstance(values, (list, tuple)):
            values = list(values)
        blob = serde.encode_list(values, k)
        return _ListWrite(sid, k, values, blob, self._snapshots.get((sid, k)))

    def _list_tx(self, cur: Any, w: "_ListWrite") -> Plan:
        """Lock the hash row, plan from the snapshot (or cold), write the plan."""
        cur.execute(self._sql["LOCK_HASH_ROW"], (w.sid, keys.hash_key(w.key)))
        row = cur.fetchone()
        stored = ListHash.parse(row[0] if row else None)
        planned: Optional[tuple[Plan, Optional[Snapshot]]] = None
        snap = w.snapshot
        if snap is not None and stored is not None and stored == snap.hash:
            planned = snap.diff(w.blob, w.values, lambda vs, start: serde.encode_items(vs, w.key, start))
        if planned is None or planned[1] is None:
            planned = self._plan_cold(cur, w.sid, w.key, w.values, w.blob, stored)
        plan, w.new_snapshot = planned
        self._apply(cur, w.sid, w.key, plan, hash_row_exists=row is not None)
        return plan

    def _plan_cold(
        self, cur: Any, sid: str, k: str, values: Sequence[Any], blob: bytes, stored: Optional[ListHash]
    ) -> tuple[Plan, Snapshot]:
        """Plan without a usable snapshot: digest every item, read the stored ones if needed."""
        datas = serde.encode_items(values, k)
        item_digests = listsync.digests(datas)
        plan = listsync.plan_cold(datas, item_digests, stored)
        if plan is None:
            cur.execute(self._sql["LOCK_ITEMS"], (sid, k))
            have = cur.fetchall()
            if [r[0] for r in have] == list(range(len(have))):
                plan = listsync.plan_against_stored(datas, [r[1].encode() for r in have])
                plan.new_hash = ListHash.of(item_digests)
            else:  # gaps in item_index: rewrite it whole
                plan = listsync.plan_rewrite(datas, item_digests)
        return plan, Snapshot.build(blob, datas, item_digests, ListHash.of(item_digests))

    def _apply(self, cur: Any, sid: str, k: str, plan: Plan, *, hash_row_exists: bool) -> None:
        if plan.new_hash is None:
            return
        for i, d in plan.upserts:
            self._check_size(d, f"item {i} of list {k!r}")
        if plan.delete_all:
            cur.execute(self._sql["DELETE_ITEMS_FROM"], (sid, k, 0))
        elif plan.delete_from is not None:
            cur.execute(self._sql["DELETE_ITEMS_FROM"], (sid, k, plan.delete_from))
        self._write_list(cur, sid, k, plan.upserts, plan.new_hash, hash_row_exists)

    def append_list(self, user_id: Optional[str], session_id: str, key: str, items: Sequence[Any]) -> int:
        """Add ``items`` after the end of the list without re-sending it; returns the new length.

        >>> store.append_list("alice", "chat-1", "memory", [reply])  # doctest: +SKIP
        12
        """
        sid, k = self._ids(user_id, session_id, key, is_list=True)
        hk = keys.hash_key(k)
        items = list(items)
        if not items:
            return self.list_length(user_id, session_id, key)
        datas = serde.encode_items(items, k)
        for i, d in enumerate(datas):
            self._check_size(d, f"new item {i} of list {k!r}")
        cache_key = (sid, k)
        snap = self._snapshots.get(cache_key)

        def tx(cur: Any) -> tuple[Optional[ListHash], ListHash, list[int]]:
            cur.execute(self._sql["LOCK_HASH_ROW"], (sid, hk))
            row = cur.fetchone()
            stored = ListHash.parse(row[0] if row else None)
            if stored is None:  # no hash row of ours: derive it from the items
                cur.execute(self._sql["LOCK_ITEMS"], (sid, k))
                have = cur.fetchall()
                existing = [r[1].encode() for r in have]
                if [r[0] for r in have] != list(range(len(have))):  # gaps: renumber 0..n-1
                    cur.execute(self._sql["DELETE_ITEMS_FROM"], (sid, k, 0))
                    self._write_rows(cur, sid, [(k, i, d) for i, d in enumerate(existing)])
                base = ListHash.of(listsync.digests(existing))
            else:
                base = stored
            new_digests = listsync.digests(datas, base.n)
            new_hash = base.extended(new_digests)
            new_items = [(base.n + i, d) for i, d in enumerate(datas)]
            self._write_list(cur, sid, k, new_items, new_hash, hash_row_exists=row is not None)
            return stored, new_hash, new_digests

        with _ListWrite.lock_of(snap):
            stored, new_hash, new_digests = self._db.run(tx, f"append_list {k!r}", write=True)
            if snap is not None and stored == snap.hash:
                snap.extend(datas, new_digests, new_hash)
                self._snapshots.put(cache_key, snap)
            else:
                self._snapshots.drop(cache_key)
        return new_hash.n

    def get_list(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        *,
        offset: int = 0,
        limit: Optional[int] = None,
    ) -> list:
        """The list's items in order; ``offset``/``limit`` read a window in one query.

        A negative ``offset`` counts from the end: ``offset=-50`` gives the last 50.

        >>> store.get_list("alice", "chat-1", "memory", offset=-50)  # doctest: +SKIP
        """
        sid, k = self._ids(user_id, session_id, key, is_list=True)
        for name, v in (("offset", offset), ("limit", limit)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise TypeError(f"{name} must be an int, got {v!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"limit {limit} must be >= 0 (or None for no limit)")

        def read(cur: Any) -> list:
            if offset < 0:
                cur.execute(self._sql["SELECT_TAIL"], (sid, k, -offset))
                rows = cur.fetchall()[::-1]
                return list(rows if limit is None else rows[:limit])
            if offset == 0 and limit is None:
                cur.execute(self._sql["SELECT_ITEMS"], (sid, k))
            else:
                cur.execute(self._sql["SELECT_WINDOW"], (sid, k, offset, _NO_LIMIT if limit is None else limit))
            return cur.fetchall()

        rows = self._db.run(read, f"get_list {k!r}", write=False)
        loads = serde.decode
        if type is None:
            return [loads(r[0]) for r in rows]
        return [loads(r[0], type) for r in rows]

    def list_length(self, user_id: Optional[str], session_id: str, key: str) -> int:
        """Number of items, read from the hash row (no scan of the items).

        >>> store.list_length("alice", "chat-1", "memory")  # doctest: +SKIP
        12
        """
        sid, k = self._ids(user_id, session_id, key, is_list=True)

        def read(cur: Any) -> int:
            cur.execute(self._sql["SELECT_HASH_ROW"], (sid, keys.hash_key(k)))
            row = cur.fetchone()
            stored = ListHash.parse(row[0] if row else None)
            if stored is not None:
                return stored.n
            cur.execute(self._sql["COUNT_ITEMS"], (sid, k))
            return int(cur.fetchone()[0])

        return self._db.run(read, f"list_length {k!r}", write=False)

    # ---- sessions ------------------------------------------------------------------------------

    def exists(self, user_id: Optional[str], session_id: str) -> bool:
        """True while the session has any row.

        >>> store.exists("alice", "chat-1")  # doctest: +SKIP
        True
        """
        sid, _ = self._ids(user_id, session_id)

        def read(cur: Any) -> bool:
            cur.execute(self._sql["SESSION_EXISTS"], (sid,))
            return cur.fetchone() is not None

        return self._db.run(read, "exists", write=False)

    def delete(self, user_id: Optional[str], session_id: str, key: Optional[str] = None) -> None:
        """Delete the whole session, or one key (a list with its hash row).

        >>> store.delete("alice", "chat-1", "memory")  # doctest: +SKIP
        >>> store.delete("alice", "chat-1")  # doctest: +SKIP
        """
        sid, k = self._ids(user_id, session_id, key)
        if k is None:
            self._db.run(lambda cur: cur.execute(self._sql["DELETE_SESSION"], (sid,)), "delete", write=True)
            self._snapshots.drop(session=sid)
        else:
            self._db.run(
                lambda cur: cur.execute(self._sql["DELETE_KEY"], (sid, k, keys.hash_key(k))),
                f"delete {k!r}",
                write=True,
            )
            self._snapshots.drop((sid, k))

    def list_session_ids(self, user_id: Optional[str]) -> set[str]:
        """The session ids of one user (None: anonymous sessions).

        >>> store.list_session_ids("alice")  # doctest: +SKIP
        {'chat-1', 'chat-2'}
        """
        prefix = keys.user_prefix(user_id)
        template, params = sql.sessions_of_user(prefix, self.exact_keys)
        statement = sql.render(template, self._table)

        def read(cur: Any) -> list:
            cur.execute(statement, params)
            return cur.fetchall()

        rows = self._db.run(read, "list_session_ids", write=False)
        # The exact prefix test also guards tables whose collation is not exact.
        return {r[0][len(prefix) :] for r in rows if r[0].startswith(prefix)}

    def truncate_all_sessions(self) -> int:
        """Remove every row (``TRUNCATE TABLE``); returns how many rows there were.

        >>> store.truncate_all_sessions()  # doctest: +SKIP
        42
        """

        def tx(cur: Any) -> int:
            cur.execute(self._sql["COUNT_ROWS"])
            count = int(cur.fetchone()[0])
            cur.execute(self._sql["TRUNCATE"])
            return count

        count = self._db.run(tx, "truncate_all_sessions", write=True)
        self._snapshots.drop()
        return count

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """Retries and reconnects so far (for tests, benchmarks and monitoring)."""
        return self._db.stats

    def close(self) -> None:
        """Close the pools this store created (a pool that was given is left open)."""
        self._db.close()
        self._snapshots.drop()

    def __enter__(self) -> "MysqlAgentStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
