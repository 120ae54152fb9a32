"""MysqlAgentStateStore: the synchronous store, and the source of truth for the async one."""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, TypeVar

from . import catalog, history, keys, listsync, locks, migrations, retention, serde, sql, transfer, wiring
from .catalog import ALL_USERS, SessionPage
from .history import HistoryItem
from .retention import PruneReport
from .errors import (
    DUPLICATE_COLUMN,
    DUPLICATE_KEY,
    CorruptStateError,
    StaleStateError,
    MysqlStateWarning,
    SchemaNotFoundError,
    SessionExistsError,
    ValueTooLargeError,
    WrongTypeError,
    errno_of,
)
from .crypto import Keyring, RowCipher, is_sealed, unreadable
from .listsync import PLAIN, Digester, ListHash, Plan, Snapshot
from .cache import LRU
from .locks import SessionLock
from .transaction import Transaction, guard, running
from .pool import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_RETRIES,
    DEFAULT_WRITE_TIMEOUT,
    Stats,
    check_int,
    check_seconds,
)
from .replicas import DEFAULT_SESSION_WAIT

__all__ = ["MysqlAgentStateStore", "VersionedState", "SavedMany", "UNVERSIONED", "SAME_USER"]

T = TypeVar("T")
#: ``save_if_version``'s "nothing written", and its "overwrite whatever is there" argument.
UNVERSIONED = -1
DEFAULT_SNAPSHOT_BYTES = 64 * 1024 * 1024
HASH_HINTS = 4096  # lists whose last seen hash row is remembered (for one-statement appends)
_NO_LIMIT = 1 << 62  # a LIMIT no list reaches (item_index is an INT), yet valid SQL
_WARNED: set[tuple[str, str]] = set()
#: ``fork``'s default ``new_user_id``: the copy belongs to the same user as the original.
SAME_USER: Any = type("SameUser", (), {"__repr__": lambda self: "<same user>"})()


class VersionedState(NamedTuple):
    """A value (or a list's items) with its version (0 when absent)."""

    value: Any
    version: int


class SavedMany(dict):
    """What :meth:`MysqlAgentStateStore.save_many` wrote: each list's plan, and in
    ``versions`` the new version of every key saved."""

    versions: dict

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.versions = {}


@dataclass
class _ListWrite:
    """One list save, validated and encoded, on its way into a transaction."""

    sid: str
    key: str
    values: Sequence[Any]
    blob: bytes
    snapshot: Optional[Snapshot]
    new_snapshot: Optional[Snapshot] = None
    expected: Optional[int] = None  # compare-and-set: the version the caller read (None: any)
    version: int = UNVERSIONED  # the list's version after the write

    def lock(self) -> Any:
        return self.lock_of(self.snapshot)

    @staticmethod
    def lock_of(snapshot: Optional[Snapshot]) -> Any:
        """One writer per list key in this process while its snapshot is in use."""
        return snapshot.lock if snapshot is not None else contextlib.nullcontext()


def _check_version(v: Any, name: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")
    if v < UNVERSIONED:
        raise ValueError(f"{name} {v} must be >= -1 (UNVERSIONED)")
    return v


def _window(offset: Any, limit: Any) -> tuple[int, Optional[int]]:
    """Check ``offset``/``limit`` and bring huge ones within what SQL accepts (same answer)."""
    for name, v in (("offset", offset), ("limit", limit)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")
    if offset is None:
        raise TypeError("offset must be an int, got None")
    if limit is not None and limit < 0:
        raise ValueError(f"limit {limit} must be >= 0 (or None for no limit)")
    offset = max(-_NO_LIMIT, min(offset, _NO_LIMIT))
    if limit is not None and limit >= _NO_LIMIT:
        limit = None
    return offset, limit


def _rows_are_whole(count: Any, lo: Any, hi: Any, stored: Optional[ListHash]) -> bool:
    """Whether a list's item rows are exactly ``0..n-1`` for the ``n`` its hash row says."""
    if stored is None:
        return True  # no hash row of ours: the cold path reads the rows anyway
    if stored.n == 0:
        return int(count) == 0
    return int(count) == stored.n and lo == 0 and hi == stored.n - 1


def _refuse_a_value(hash_row: Any, items: Sequence[tuple], sid: str, k: str, operation: str) -> None:
    """Refuse a list operation on a key that holds a single value: no hash row (of any
    format) and row 0 alone. (A key is a value or a list, never both: :class:`WrongTypeError`.)"""
    if hash_row is None and len(items) == 1 and items[0][0] == 0:
        raise WrongTypeError(sid, k, operation)


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
    _window_of = staticmethod(_window)

    def __init__(
        self,
        pool: Any = None,
        database_name: Optional[str] = None,
        table_name: Optional[str] = None,
        create_if_not_exist: bool = False,
        *,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
        encryption: Optional[Keyring] = None,
        hosts: Optional[Sequence[Any]] = None,
        replicas: Optional[Sequence[Any]] = None,
        session_wait: float = DEFAULT_SESSION_WAIT,
        keep_history: bool = False,
    ) -> None:
        """Use ``pool`` (a DBUtils ``PooledDB`` of pymysql connections, or anything with
        ``.connection()``); the store never closes a pool it was given.

        ``hosts`` (instead of ``pool``): one pool per host, in order of preference, for
        failover (:mod:`mysql_state.hosts`); each entry a pool or a ``(write_pool,
        read_pool)`` pair; a ``pool`` given too is the first host. ``replicas``: one read pool
        per replica, for reads with ``consistency="session"`` or ``"eventual"``
        (:mod:`mysql_state.replicas`); ``session_wait`` bounds, in seconds, how long a replica
        may take to catch up with this store's last write to a session before the primary
        serves a ``"session"`` read.

        ``pool_timeout`` bounds the wait for a free connection, ``retries`` the retries of a
        transaction that hit a lock conflict, ``snapshot_bytes`` the memory for the
        per-process list snapshots that make ``save_list`` cheap (0 turns them off).
        ``encryption`` (a :class:`Keyring`) encrypts every value and list item at rest
        (AES-256-GCM, see :mod:`mysql_state.crypto`); rows written without it read as they are.
        ``keep_history`` archives what a shrinking list save drops (see :meth:`get_history`).
        """
        parts = wiring.given(pool, hosts, replicas, pool_timeout=pool_timeout, retries=retries,
                             session_wait=session_wait)
        self._open(parts, database_name, table_name, create_if_not_exist, snapshot_bytes, encryption, keep_history)

    @classmethod
    def _assembled(cls, parts: wiring.Parts, database_name: Optional[str], table_name: Optional[str],
                   create_if_not_exist: bool, snapshot_bytes: int, encryption: Optional[Keyring],
                   keep_history: bool) -> "MysqlAgentStateStore":
        """A store over ``parts`` made by :func:`mysql_state.wiring.from_url` (pools it owns)."""
        store = cls.__new__(cls)
        store._open(parts, database_name, table_name, create_if_not_exist, snapshot_bytes, encryption, keep_history)
        return store

    def _open(self, parts: wiring.Parts, database_name: Optional[str], table_name: Optional[str],
              create_if_not_exist: bool, snapshot_bytes: int, encryption: Optional[Keyring],
              keep_history: bool) -> None:
        """What both constructors do: check the options, connect the parts, set up the table."""
        self.database_name = keys.identifier(database_name, "database name", keys.DEFAULT_DATABASE)
        self.table_name = keys.identifier(table_name, "table name", keys.DEFAULT_TABLE)
        check_int("snapshot_bytes", snapshot_bytes, 0)
        if encryption is not None and not isinstance(encryption, Keyring):
            raise TypeError(f"encryption must be a mysql_state.Keyring, got {type(encryption).__name__}")
        self._keyring = encryption
        self._cipher = RowCipher(encryption, self.table_name) if encryption is not None else None
        self._digesters: dict[Optional[str], Digester] = {None: PLAIN}
        self._dig = self._digester_of(encryption.current) if encryption is not None else PLAIN
        wired = parts.connect(f"the store of `{self.database_name}`.`{self.table_name}`")
        self._db, self._metrics = wired.db, wired.metrics
        #: Connections per pool (None for a given pool); the async store sizes its threads to it.
        self.pool_size: Optional[int] = wired.pool_size
        self._snapshots: LRU[tuple[str, str], Snapshot] = LRU(max_bytes=snapshot_bytes, size_of=lambda s: s.nbytes)
        self._hints: LRU[tuple[str, str], ListHash] = LRU(max_entries=HASH_HINTS)  # the hash row last seen: one-statement appends
        self._damaged: set[tuple[str, str]] = set()  # lists a read found damaged: rewrite on save
        self.keep_history = bool(keep_history)
        # Before every call: no write from inside this store's own transaction(fn), none in a lost lease.
        self._db.guard = functools.partial(guard, self._db)
        self._table = keys.quote_table(self.database_name, self.table_name)
        try:
            self._setup(create_if_not_exist)  # the primary only: replicas get no DDL
        except BaseException:
            self._db.close()  # and the replicas' connector, behind its router
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
        encryption: Optional[Keyring] = None,
        replica_urls: Optional[Sequence[str]] = None,
        session_wait: float = DEFAULT_SESSION_WAIT,
        keep_history: bool = False,
        **connect_kwargs: Any,
    ) -> "MysqlAgentStateStore":
        """A store with its own pools, closed by :meth:`close`.

        ``url`` is ``mysql://user:password@host:port/database``; the path's database is used
        unless ``database_name`` is given; ``?unix_socket=/path`` connects through a socket.
        Other keywords go to ``pymysql.connect``. A host list (``h1:3306,h2:3306,h3:3306``)
        is an order of preference: the store uses the first host that answers and fails
        over to the next (:mod:`mysql_state.hosts`). ``replica_urls`` (read-only users
        suffice) serve reads made with ``consistency="session"`` or ``"eventual"``
        (:mod:`mysql_state.replicas`); their database is this store's.

        >>> with MysqlAgentStateStore.from_url("mysql://root@127.0.0.1:3306/agentscope") as s:
        ...     s.exists("alice", "chat-1")  # doctest: +SKIP
        False
        """
        check_int("snapshot_bytes", snapshot_bytes, 0)
        parts, url_database = wiring.from_url(
            url, replica_urls, pool_size=pool_size, pool_timeout=pool_timeout, connect_timeout=connect_timeout,
            read_timeout=read_timeout, write_timeout=write_timeout, retries=retries, session_wait=session_wait,
            **connect_kwargs)
        chosen = database_name if database_name is not None and database_name.strip() else url_database
        return cls._assembled(parts, chosen, table_name, create_if_not_exist, snapshot_bytes, encryption, keep_history)

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
                try:
                    cur.execute(sql.render(sql.ADD_VERSION_COLUMN, self._table))
                except Exception as exc:
                    if errno_of(exc) != DUPLICATE_COLUMN:  # another worker added it meanwhile
                        raise
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
        """Validate and pack ids; ``key=None`` means the whole session (only where allowed)."""
        sid = keys.pack(user_id, session_id)
        k = keys.state_key(key, is_list=is_list, exact=self.exact_keys) if key is not None else None
        if self.pads_spaces:
            for what, v in (("user_id", user_id or ""), ("session_id", session_id), ("key", k or "")):
                if v.endswith(" "):
                    raise ValueError(
                        f"{what} {v!r} ends with a space, and this table's collation ignores "
                        "trailing spaces (so it would share a row with the trimmed id); make the "
                        "key columns exact (see the warning at open) to allow it"
                    )
        return sid, k

    def _key_ids(self, user_id: Optional[str], session_id: str, key: str, *, is_list=False) -> tuple[str, str]:
        """:meth:`_ids` for calls whose key is required (None is refused, naming ``key``)."""
        if key is None:
            raise TypeError("key must be a str, got None")
        return self._ids(user_id, session_id, key, is_list=is_list)

    # ---- encryption at rest (a no-op without a keyring) ---------------------------------------

    def _digester_of(self, kid: Optional[str]) -> Optional[Digester]:
        """The digester of hash rows keyed with ``kid`` (None: that key is not in the ring)."""
        found = self._digesters.get(kid)
        if found is None and self._keyring is not None and kid in self._keyring:
            found = self._digesters[kid] = Digester(self._keyring.digest_key(kid), kid)
        return found

    def _usable(self, stored: Optional[ListHash]) -> tuple[Optional[ListHash], Digester]:
        """A stored hash row and the digester it needs; a hash row keyed with a key this store
        lacks counts as missing (the list is then written whole under the current key)."""
        if stored is None:
            return None, self._dig
        dig = self._digester_of(stored.dk)
        return (stored, dig) if dig is not None else (None, self._dig)

    def _seal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        return data if self._cipher is None else self._cipher.seal(sid, k, index, data)

    def _plain(self, sid: str, k: str, index: int, text: Any) -> bytes:
        """A stored row's plaintext JSON; a sealed row without a keyring is a DecryptionError."""
        if self._cipher is not None:
            return self._cipher.open(sid, k, index, text)
        if is_sealed(text):
            raise unreadable(sid, k, index, text)
        return text.encode("utf-8") if isinstance(text, str) else text

    def _reseal(self, cur: Any, from_sid: str, to_sid: str, key: Optional[str], first: int, shift: int) -> None:
        """Re-encrypt rows copied server-side (a fork, an archive) for their new place: the row
        at ``(to_sid, k, i)`` was sealed for ``(from_sid, k, i + shift)``. Rows cross the
        network here: under encryption that cannot be avoided, since each row is bound to its place."""
        cur.execute(self._sql["COPIED_ROWS"], (to_sid, first, key, key))
        for k, i, text in cur.fetchall():
            if not is_sealed(text):
                continue  # hash rows and rows written without encryption
            plain = self._cipher.open(from_sid, k, i + shift, text)
            cur.execute(self._sql["RESEAL_AT"], (self._cipher.seal(to_sid, k, i, plain).decode(), to_sid, k, i))

    def _decode(self, sid: str, k: str, index: int, text: Any, type: Optional[type] = None) -> Any:
        return serde.decode_row(self._plain(sid, k, index, text), type, sid, k, index)

    def _check_size(self, data: bytes, what: str) -> None:
        size = sql.escaped_size(data) if self._cipher is None else (len(data) + 28) * 4 // 3 + 80
        need = size + 2 * 4 * 2 * keys.MAX_ID_CHARS + 256
        if need > self.max_allowed_packet:
            raise ValueTooLargeError(
                f"{what}: the value's JSON is {len(data)} bytes ({need} bytes in the statement), "
                f"more than the server's max_allowed_packet of {self.max_allowed_packet} bytes; "
                "nothing was written"
            )

    def _write_rows(self, cur: Any, sid: str, rows: list[tuple[str, int, bytes]]) -> None:
        rows = self._sealed_rows(sid, rows)
        limit = self.max_allowed_packet - 1024
        for statement, params in sql.upsert_rows(self._upsert, sid, rows, limit, catalog.row(sid)):
            cur.execute(statement, params)

    def _touch(self, cur: Any, sid: str) -> None:
        """Mark the session active in its catalog row (paths with no upsert to carry it)."""
        cur.execute(self._sql["CATALOG_TOUCH"], (sid,))

    def _write_list(
        self, cur: Any, sid: str, k: str, items: list[tuple[int, bytes]], new_hash: ListHash, with_hash: bool
    ) -> None:
        """Items, and the hash row in the same multi-row upsert when ``with_hash`` (a list
        whose hash row exists; a new list's is created first by :meth:`_create_hash_row`)."""
        rows = [(k, i, d) for i, d in items]
        if with_hash:
            rows.append((keys.hash_key(k), 0, new_hash.to_json()))
        self._write_rows(cur, sid, rows)

    def _sealed_rows(self, sid: str, rows: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
        """Rows as stored: values and items sealed (with a keyring), hash rows as they are."""
        if self._cipher is None:
            return rows
        seal, suffix = self._cipher.seal, keys.HASH_SUFFIX
        return [(k, i, d if k.endswith(suffix) else seal(sid, k, i, d)) for k, i, d in rows]

    def _create_hash_row(self, cur: Any, sid: str, k: str, new_hash: ListHash) -> None:
        """INSERT a new list's hash row, its version one past a value it replaces.

        Of two writers racing to create one list, the second waits on the first's row and
        then fails with 1062 (duplicate key): its whole transaction is retried against the
        created list.
        """
        hk = keys.hash_key(k)
        cur.execute(self._sql["INSERT_HASH_ROW"], (sid, hk, new_hash.to_json().decode(), sid, k))

    # ---- single values -------------------------------------------------------------------------

    def save(self, user_id: Optional[str], session_id: str, key: str, value: Any) -> None:
        """Store one value at ``key`` (upsert; its version grows by one); a list under the key
        is removed.

        >>> store.save("alice", "chat-1", "summary", {"text": "talked about MySQL"})  # doctest: +SKIP
        """
        self._save_value(user_id, session_id, key, value)

    def _save_value(self, user_id, session_id, key, value) -> int:
        sid, k, text, size = self._prepare_value(user_id, session_id, key, value)
        version = self._db.run(lambda cur: self._value_tx(cur, sid, k, text), f"save {k!r}", write=True, session=sid)
        self._forget((sid, k))
        self._metrics.saved("value", 1, size)
        return version

    def _prepare_value(self, user_id, session_id, key, value) -> tuple[str, str, str, int]:
        """Validate and encode before any SQL: (packed session id, key, the row's text, the
        bytes of its plaintext JSON)."""
        sid, k = self._key_ids(user_id, session_id, key)
        data = serde.encode(value, k)
        self._check_size(data, f"save {k!r}")
        return sid, k, self._seal(sid, k, 0, data).decode(), len(data)

    def _key_head(self, cur: Any, sid: str, k: str) -> tuple[int, bool, bool]:
        """Lock what is under ``k``: (its version, 0 when absent; is it a list; was there a row 0).

        Waits for a list writer (who holds the hash row), so that rows it inserted are
        committed, hence seen, by the DELETE that follows.
        """
        hk = keys.hash_key(k)
        cur.execute(self._sql["LOCK_KEY_HEAD"], (hk, sid, k, hk))
        rows = cur.fetchall()
        hash_version = next((int(r[2]) for r in rows if r[0]), 0)
        row0 = next((int(r[2]) for r in rows if not r[0] and r[1] == 0), 0)
        is_list = bool(hash_version) or any(not r[0] and r[1] == 1 for r in rows)
        return (hash_version or row0), is_list, bool(row0)

    def _value_tx(self, cur: Any, sid: str, k: str, text: str, expected: Optional[int] = None) -> int:
        """Write one value, removing a list under the key; returns the new version, or
        ``UNVERSIONED`` when ``expected`` (compare-and-set) is not the stored version."""
        stored, is_list, had_row0 = self._key_head(cur, sid, k)
        if expected is not None and stored != expected:
            return UNVERSIONED
        version = None if expected is None else expected + 1
        if is_list:
            cur.execute(self._sql["DELETE_LIST_REMAINS"], (sid, k, keys.hash_key(k)))
        new = stored + 1 if version is None else version
        cur.execute(self._sql["UPSERT_VALUE"], (sid, k, text, new, sid))  # + the catalog row
        updated = int(cur.lastrowid or 0)  # the new version when row 0 was updated, 0 if inserted
        if updated and not had_row0 and not is_list:
            # Row 0 appeared after the lock: a list was being created beside us. It is
            # committed now (the upsert waited for it), so its remains are visible.
            cur.execute(self._sql["DELETE_LIST_REMAINS"], (sid, k, keys.hash_key(k)))
        return updated or new

    def get(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        default: Any = None,
        *,
        consistency: str = "strong",
    ) -> Any:
        """The value at ``key`` (an instance of ``type`` when given), or ``default``.

        As in the Java store, the value is the row at ``item_index = 0``: for a key that holds
        a list that is its first item (read lists with :meth:`get_list`). ``consistency`` (every read method has it): ``"strong"`` reads the primary,
        ``"session"`` or ``"eventual"`` may read a replica (see :mod:`mysql_state.replicas`).

        >>> store.get("alice", "chat-1", "summary")  # doctest: +SKIP
        {'text': 'talked about MySQL'}
        """
        sid, k = self._key_ids(user_id, session_id, key)
        found = self._read_value(sid, k, serde.check_type(type), consistency)
        return default if found is None or (found[2] and found[0] is None) else found[0]

    def get_versioned(
        self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
        consistency: str = "strong",
    ) -> VersionedState:
        """The value and its version; ``(None, 0)`` when absent.

        For a key that holds a list: its row 0 and the list's version (its hash row's), the
        version that :meth:`save_if_version` checks before it replaces the list by a value.

        >>> value, version = store.get_versioned("alice", "chat-1", "plan")  # doctest: +SKIP
        """
        sid, k = self._key_ids(user_id, session_id, key)
        found = self._read_value(sid, k, serde.check_type(type), consistency)
        if found is None:
            return VersionedState(None, 0)
        return VersionedState(found[0], found[1])

    def _read_value(self, sid: str, k: str, type: Optional[type], consistency: str = "strong") -> Optional[tuple[Any, int, bool]]:
        """(row 0's value, the key's version, is it a list) in one statement; None when absent."""
        hk = keys.hash_key(k)

        def read(cur: Any) -> list:
            cur.execute(self._sql["SELECT_VALUE"], (hk, sid, k, hk))
            return cur.fetchall()

        return self._db.run(lambda cur: self._value_of(sid, k, read(cur), type), f"get {k!r}", write=False,
                            consistency=consistency, session=sid)  # decoded inside: its errors are counted

    def _value_of(self, sid: str, k: str, rows: Sequence[tuple], type: Optional[type]) -> Optional[tuple[Any, int, bool]]:
        """From rows ``(is hash row, state_data, version)`` of a key: (row 0's value, the key's
        version (a list's is its hash row's), is it a list), or None when the key is absent."""
        listed = next((r for r in rows if r[0]), None)
        row0 = next((r for r in rows if not r[0]), None)
        if listed is None and row0 is None:
            return None
        value = None if row0 is None else self._decode(sid, k, 0, row0[1], type)
        version = int(listed[2]) if listed is not None else int(row0[2])
        return value, version, listed is not None

    def save_if_version(
        self, user_id: Optional[str], session_id: str, key: str, value: Any, expected_version: int
    ) -> int:
        """Compare-and-set: write only if the stored version is ``expected_version``.

        ``0`` creates the key if absent; ``UNVERSIONED`` (-1) overwrites unconditionally.
        Returns the new version, or ``UNVERSIONED`` when nothing was written. A list under
        the key has the version of its hash row, and is removed when the value is written.

        >>> v = store.save_if_version("alice", "chat-1", "plan", {"step": 1}, 0)  # doctest: +SKIP
        >>> store.save_if_version("alice", "chat-1", "plan", {"step": 2}, v)  # doctest: +SKIP
        2
        """
        _check_version(expected_version, "expected_version")
        sid, k, text, size = self._prepare_value(user_id, session_id, key, value)
        if expected_version == UNVERSIONED:
            version = self._db.run(lambda cur: self._value_tx(cur, sid, k, text), f"save {k!r}", write=True, session=sid)
        else:
            version = self._db.run(lambda cur: self._cas_tx(cur, sid, k, text, expected_version),
                                   f"save_if_version {k!r}", write=True, session=sid)
        if version != UNVERSIONED:
            self._forget((sid, k))
            self._metrics.saved("value", 1, size)
        else:
            self._metrics.stale()
        return version

    def _cas_tx(self, cur: Any, sid: str, k: str, text: str, expected: int) -> int:
        if expected == 0:
            if self._key_head(cur, sid, k)[0]:
                return UNVERSIONED
            try:  # absent: create it; a creator racing us (its row in flight) wins
                cur.execute(self._sql["INSERT_VALUE"], (sid, k, text))
            except Exception as exc:
                if errno_of(exc) == DUPLICATE_KEY:
                    return UNVERSIONED
                raise
            self._touch(cur, sid)
            return 1
        return self._value_tx(cur, sid, k, text, expected)

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
            plan = self._db.run(lambda cur: self._list_tx(cur, w), f"save_list {w.key!r}", write=True, session=w.sid)
        self._remember((w.sid, w.key), w.new_snapshot)
        self._count_save(plan)
        return plan

    def _count_save(self, plan: Plan) -> None:
        self._metrics.saved(plan.kind, len(plan.upserts), sum(len(d) for _, d in plan.upserts))

    def save_many(
        self,
        user_id: Optional[str],
        session_id: str,
        values: Optional[Mapping[str, Any]] = None,
        lists: Optional[Mapping[str, Sequence[Any]]] = None,
        *,
        expected_versions: Optional[Mapping[str, int]] = None,
    ) -> "SavedMany":
        """Save several values and lists of one session in ONE transaction (all or nothing).

        Lists are saved as :meth:`save_list` does (only what changed); returns each list's plan
        (a dict), with the new version of every key in ``.versions``. ``expected_versions``
        (key -> the version read, ``0`` for absent) makes it a compare-and-set: when any key
        holds another version, :class:`StaleStateError` names it and nothing is written.

        >>> store.save_many("alice", "chat-1", values={"summary": s}, lists={"context": msgs})  # doctest: +SKIP
        """
        for name, m in (("values", values), ("lists", lists), ("expected_versions", expected_versions)):
            if m is not None and not isinstance(m, Mapping):
                raise TypeError(f"{name} must be a mapping of key to {name[:-1]}, got {type(m).__name__}")
        values, lists, expected = dict(values or {}), dict(lists or {}), dict(expected_versions or {})
        both = set(values) & set(lists)
        if both:
            raise ValueError(f"keys {sorted(both)} are given both as a value and as a list")
        unknown = set(expected) - set(values) - set(lists)
        if unknown:
            raise ValueError(f"expected_versions names keys {sorted(unknown)} that are not saved")
        for k, v in expected.items():
            _check_version(v, f"expected_versions[{k!r}]")
        writes = [self._prepare_list(user_id, session_id, k, v) for k, v in sorted(lists.items())]
        for w in writes:
            w.expected = expected.get(w.key)
        prepared = [self._prepare_value(user_id, session_id, k, v) for k, v in sorted(values.items())]
        if not writes and not prepared:
            keys.pack(user_id, session_id)
            return SavedMany()

        def tx(cur: Any) -> SavedMany:
            out = SavedMany({w.key: self._list_tx(cur, w) for w in writes})
            out.versions = {w.key: w.version for w in writes}
            for sid, k, text, _ in prepared:
                want = expected.get(k, UNVERSIONED)
                if want != UNVERSIONED:
                    got = self._value_tx(cur, sid, k, text, want)
                    if got == UNVERSIONED:
                        raise StaleStateError(k, want, self._key_head(cur, sid, k)[0])
                    out.versions[k] = got
                else:
                    out.versions[k] = self._value_tx(cur, sid, k, text)
            return out

        with contextlib.ExitStack() as stack:
            for w in writes:
                stack.enter_context(w.lock())
            try:
                result = self._db.run(tx, f"save_many {sorted(lists) + sorted(values)}", write=True,
                                      session=keys.pack(user_id, session_id))
            except StaleStateError:
                for w in writes:
                    self._forget((w.sid, w.key))
                raise
        for w in writes:
            self._remember((w.sid, w.key), w.new_snapshot)
            self._count_save(result[w.key])
        for sid, k, _, size in prepared:
            self._forget((sid, k))
            self._metrics.saved("value", 1, size)
        return result

    def save_list_if_version(
        self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any], expected_version: int
    ) -> int:
        """:meth:`save_list` as a compare-and-set: only if the list's version is ``expected_version``.

        The contract of :meth:`save_if_version`: ``0`` creates the list if the key is absent,
        ``UNVERSIONED`` (-1) saves unconditionally; returns the new version (the list's hash
        row version, as :meth:`get_list_versioned` reads it), or ``UNVERSIONED`` when nothing
        was written. Still writes only the items that changed.

        >>> items, version = store.get_list_versioned("alice", "chat-1", "memory")  # doctest: +SKIP
        >>> store.save_list_if_version("alice", "chat-1", "memory", items + [msg], version)  # doctest: +SKIP
        """
        _check_version(expected_version, "expected_version")
        w = self._prepare_list(user_id, session_id, key, values)
        w.expected = expected_version
        try:
            with w.lock():
                plan = self._db.run(lambda cur: self._list_tx(cur, w), f"save_list_if_version {w.key!r}", write=True,
                                    session=w.sid)
        except StaleStateError:
            self._forget((w.sid, w.key))
            return UNVERSIONED
        self._remember((w.sid, w.key), w.new_snapshot)
        self._count_save(plan)
        return w.version

    def _prepare_list(self, user_id, session_id, key, values) -> "_ListWrite":
        """Validate and encode a list save before any SQL."""
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)
        values = serde.check_sequence(values, "values")
        blob = serde.encode_list(values, k)
        return _ListWrite(sid, k, values, blob, self._snapshots.get((sid, k)))

    def _list_tx(self, cur: Any, w: "_ListWrite") -> Plan:
        """Lock the hash row, plan (warm snapshot, else the checkpoint, else item by item), write.

        A warm save that only appends is ONE statement, checked against the snapshot's hash
        row as :meth:`_append_if_hash` does (the common turn: 2 round trips with the COMMIT).
        """
        encode = lambda vs, start: serde.encode_items(vs, w.key, start, check=False)  # noqa: E731
        snap = w.snapshot
        if snap is not None and w.expected is None:
            planned = snap.diff(w.blob, w.values, encode)
            if planned is not None and planned[0].kind == "append" and planned[0].delete_from is None:
                plan = planned[0]
                self._check_upserts(w.key, plan, w.values)
                version = self._append_if_hash(cur, w.sid, w.key, plan.upserts, snap.hash, plan.new_hash)
                if version:
                    w.new_snapshot, w.version = planned[1], version
                    return plan
        cur.execute(self._sql["LOCK_HASH_ROW"], (w.sid, keys.hash_key(w.key)))
        row = cur.fetchone()
        before = int(row[1]) if row else (self._key_head(cur, w.sid, w.key)[0] if w.expected is not None else 0)
        if w.expected is not None and w.expected != UNVERSIONED and w.expected != before:
            raise StaleStateError(w.key, w.expected, before)
        stored, dig = self._usable(ListHash.parse(row[0] if row else None))
        if (w.sid, w.key) in self._damaged:
            stored = None  # a read found its rows damaged: the hash row cannot vouch for them
        planned: Optional[tuple[Plan, Snapshot]] = None
        if snap is not None and stored is not None and stored == snap.hash:
            planned = snap.diff(w.blob, w.values, encode)
        cold = planned is None
        if cold and stored is not None:
            planned = self._plan_from_checkpoint(cur, w, stored, encode, dig)
        if planned is None:
            planned = self._plan_per_item(cur, w.sid, w.key, w.values, w.blob, stored, dig)
        plan, w.new_snapshot = planned
        if plan.kind == "unchanged" and stored is not None:
            # Nothing to write by the hash row: check the rows still are what it describes
            # (a row deleted by hand would otherwise never be repaired).
            cur.execute(self._sql["ITEMS_SHAPE"], (w.sid, w.key))
            if not _rows_are_whole(*cur.fetchone(), stored):
                plan, w.new_snapshot = self._plan_per_item(cur, w.sid, w.key, w.values, w.blob, None, self._dig)
        self._apply(cur, w.sid, w.key, plan, w.values, hash_row_exists=row is not None)
        w.version = before if plan.new_hash is None else before + 1
        return plan

    def _plan_from_checkpoint(
        self, cur: Any, w: "_ListWrite", stored: ListHash, encode, dig: Digester
    ) -> Optional[tuple[Plan, Snapshot]]:
        """A cold save that trusts the stored checkpoint (one hash over its bytes); reads the
        stored items after it only when their digest sum says one changed."""
        start = listsync.cold_start(w.blob, w.values, stored, encode, dig)
        if start is None:
            return None
        tail = None
        if start.needs_read():
            cur.execute(self._sql["SELECT_ITEMS_FROM"], (w.sid, w.key, start.p))
            rows = cur.fetchall()
            if [r[0] for r in rows] != list(range(start.p, stored.n)):
                return None  # the rows do not match the hash row: the per-item path repairs
            tail = [self._plain(w.sid, w.key, r[0], r[1]) for r in rows]
        return start.plan(tail)

    def _plan_per_item(
        self, cur: Any, sid: str, k: str, values: Sequence[Any], blob: bytes, stored: Optional[ListHash],
        dig: Digester,
    ) -> tuple[Plan, Snapshot]:
        """Plan without snapshot or checkpoint: digest every item, read the stored ones if needed."""
        datas = serde.encode_items(values, k, check=False)
        item_digests = dig.digests(datas)
        new_hash, snap = listsync.full_snapshot(blob, datas, item_digests, dig)
        # Without a hash row of ours a rewrite would do, but it cannot tell what a shrink drops:
        # with history kept, the stored items are read so the archive gets them.
        keep = stored is None and self.keep_history
        plan = None if keep else listsync.plan_cold(datas, item_digests, stored)
        if plan is None:
            cur.execute(self._sql["LOCK_ITEMS"], (sid, k))
            have = cur.fetchall()
            if keep and not have:  # a new list, as plan_cold would have it
                plan = listsync.plan_rewrite(datas)
            elif [r[0] for r in have] == list(range(len(have))):
                plan = listsync.plan_against_stored(datas, [self._plain(sid, k, r[0], r[1]) for r in have])
            else:  # gaps in item_index: rewrite it whole
                plan = listsync.plan_rewrite(datas)
        if plan.kind != "unchanged" or stored != new_hash:
            plan.new_hash = new_hash  # (an unchanged list may still get its checkpoint moved)
        return plan, snap

    def _check_upserts(self, k: str, plan: Plan, values: Sequence[Any]) -> None:
        """Refuse, before writing, an item the plan writes that holds NaN/inf or is too large."""
        for i, d in plan.upserts:
            serde.check_finite(values[i], d, k, i)
            self._check_size(d, f"item {i} of list {k!r}")

    def _apply(self, cur: Any, sid: str, k: str, plan: Plan, values: Sequence[Any], *, hash_row_exists: bool) -> None:
        if plan.new_hash is None:
            return
        self._check_upserts(k, plan, values)
        if not hash_row_exists:
            self._create_hash_row(cur, sid, k, plan.new_hash)
        if self.keep_history:
            history.archive(cur, self._sql, sid, k, plan, self._reseal if self._cipher is not None else None)
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
        sid, k, datas = self._prepare_append(user_id, session_id, key, items)
        if not datas:
            return self.list_length(user_id, session_id, key)
        cache_key = (sid, k)
        snap = self._snapshots.get(cache_key)
        hint = snap.hash if snap is not None else self._hints.get(cache_key)
        with _ListWrite.lock_of(snap):
            stored, new_hash, _ = self._db.run(
                lambda cur: self._append_tx(cur, sid, k, datas, hint), f"append_list {k!r}", write=True, session=sid
            )
            if snap is not None and stored == snap.hash:
                snap.extend(datas, new_hash)
                self._snapshots.put(cache_key, snap)
            else:
                self._snapshots.drop(cache_key)
            self._hints.put(cache_key, new_hash)
        self._metrics.saved("append", len(datas), sum(map(len, datas)))
        return new_hash.n

    def _prepare_append(self, user_id, session_id, key, items) -> tuple[str, str, list[bytes]]:
        """Validate and encode an append before any SQL: (session id, key, items' JSON)."""
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)
        datas = serde.encode_items(serde.check_sequence(items, "items"), k)
        for i, d in enumerate(datas):
            self._check_size(d, f"new item {i} of list {k!r}")
        return sid, k, datas

    def _append_tx(
        self, cur: Any, sid: str, k: str, datas: list[bytes], hint: Optional[ListHash] = None
    ) -> tuple[Optional[ListHash], ListHash, list[int]]:
        """Append under the list's hash row. With ``hint`` (the hash row this process last saw)
        it is ONE statement: the items and the new hash row, the hash row written only if it
        still holds ``hint`` (checked under its lock); any other outcome is rolled back and the
        append is made the locked way."""
        hint, hint_dig = self._usable(hint)
        if hint is not None:
            new_digests = hint_dig.digests(datas, hint.n)
            new_hash = hint.extended(new_digests)
            if self._append_if_hash(cur, sid, k, list(enumerate(datas, hint.n)), hint, new_hash):
                return hint, new_hash, new_digests
        cur.execute(self._sql["LOCK_HASH_ROW"], (sid, keys.hash_key(k)))
        row = cur.fetchone()
        stored, dig = self._usable(ListHash.parse(row[0] if row else None))
        if stored is None:  # no hash row of ours: derive it from the items
            cur.execute(self._sql["LOCK_ITEMS"], (sid, k))
            have = cur.fetchall()
            _refuse_a_value(row, have, sid, k, "append_list")
            existing = [self._plain(sid, k, r[0], r[1]) for r in have]
            if [r[0] for r in have] != list(range(len(have))):  # gaps: renumber 0..n-1
                cur.execute(self._sql["DELETE_ITEMS_FROM"], (sid, k, 0))
                self._write_rows(cur, sid, [(k, i, d) for i, d in enumerate(existing)])
            base = dig.of(dig.digests(existing))
        else:
            base = stored
        new_digests = dig.digests(datas, base.n)
        new_hash = base.extended(new_digests)
        new_items = [(base.n + i, d) for i, d in enumerate(datas)]
        if row is None:
            self._create_hash_row(cur, sid, k, new_hash)
        self._write_list(cur, sid, k, new_items, new_hash, with_hash=row is not None)
        return stored, new_hash, new_digests

    def _append_if_hash(
        self, cur: Any, sid: str, k: str, items: list[tuple[int, bytes]], expected: ListHash, new_hash: ListHash
    ) -> int:
        """Write new items and the new hash row in ONE statement, the hash row only if it still
        holds ``expected`` (checked under its lock); returns the list's new version. 0 (all
        undone, a new transaction begun): the caller goes the locked way."""
        hk = keys.hash_key(k)
        rows = self._sealed_rows(sid, [(hk, 0, new_hash.to_json())] + [(k, i, d) for i, d in items])
        tail = self._sql["APPEND_IF_HASH_TAIL"]
        statements = sql.upsert_rows((self._upsert[0], tail), sid, rows, self.max_allowed_packet - 1024,
                                     catalog.row(sid))
        if len(statements) != 1:
            return 0  # more than one packet: the locked way
        statement, params = statements[0]
        text = expected.to_json().decode()
        affected = cur.execute(statement, params + (hk, text, hk, text))
        # hash row updated (2, and LAST_INSERT_ID set) + 1 per new item + catalog row (1 or 2)
        if cur.lastrowid and affected - len(items) in (3, 4):
            return int(cur.lastrowid)
        cur.execute(sql.ROLLBACK)  # another writer got there first: undo, then lock and read
        if not self._db.owned:
            cur.execute(sql.READ_COMMITTED_NEXT)
        return 0

    def get_list(
        self,
        user_id: Optional[str],
        session_id: str,
        key: str,
        type: Optional[type] = None,
        *,
        offset: int = 0,
        limit: Optional[int] = None,
        consistency: str = "strong",
    ) -> list:
        """The list's items in order; ``offset``/``limit`` read a window in one query.

        A negative ``offset`` counts from the end: ``offset=-50`` gives the last 50. Rows that
        disagree with the list's hash row (a missing item) raise :class:`CorruptStateError`.

        >>> store.get_list("alice", "chat-1", "memory", offset=-50)  # doctest: +SKIP
        """
        return self._get_list(user_id, session_id, key, type, offset, limit, consistency)[0]

    def get_list_versioned(
        self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
        consistency: str = "strong",
    ) -> VersionedState:
        """The whole list and its version, read in one statement; ``([], 0)`` when absent.

        >>> items, version = store.get_list_versioned("alice", "chat-1", "memory")  # doctest: +SKIP
        """
        items, version = self._get_list(user_id, session_id, key, type, 0, None, consistency)
        return VersionedState(items, version)

    def get_many(
        self,
        user_id: Optional[str],
        session_id: str,
        values: Sequence[str] = (),
        lists: Sequence[str] = (),
        *,
        versioned: bool = False,
        consistency: str = "strong",
    ) -> dict[str, Any]:
        """Values and whole lists of one session in ONE statement: one consistent snapshot, one
        round trip. Missing keys are absent from the result; ``versioned=True`` gives each as
        a :class:`VersionedState` (value, version).

        >>> store.get_many("alice", "chat-1", values=["summary"], lists=["context"])  # doctest: +SKIP
        {'summary': {...}, 'context': [...]}
        """
        found = self._get_many(user_id, session_id, values, lists, consistency)
        if versioned:
            return {k: VersionedState(*vv) for k, vv in found.items()}
        return {k: v for k, (v, _) in found.items()}

    def get_prefix(
        self, user_id: Optional[str], session_id: str, prefix: str = "", *, versioned: bool = False,
        consistency: str = "strong",
    ) -> dict[str, Any]:
        """Every single value of one session whose key starts with ``prefix`` (``""``: all of
        them), in key order, in ONE statement reading a primary-key range: a key-range read for
        indexes kept as values (ADK's session index, LangGraph's namespaces). Keys that hold a
        list are left out (read them with :meth:`get_list`); ``versioned=True`` gives each as a
        :class:`VersionedState`.

        >>> store.get_prefix("alice", "chat-1", "plan/")  # doctest: +SKIP
        {'plan/1': {...}, 'plan/2': {...}}
        """
        sid, _ = self._ids(user_id, session_id)
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}: {prefix!r}")
        statement, params = sql.select_prefix(self._table, sid, prefix, self.exact_keys)

        def decode(rows: list) -> dict[str, Any]:
            rows = [r for r in rows if r[0].startswith(prefix)]
            lists = {k[: -len(keys.HASH_SUFFIX)] for k, _, _ in rows if k.endswith(keys.HASH_SUFFIX)}
            out: dict[str, Any] = {}
            for k, data, version in rows:
                if k in lists or k.endswith(keys.HASH_SUFFIX):
                    continue
                value = self._decode(sid, k, 0, data)
                out[k] = VersionedState(value, int(version)) if versioned else value
            return out

        return self._db.run(lambda cur: (cur.execute(statement, params), decode(cur.fetchall()))[1], "get_prefix",
                            write=False, consistency=consistency, session=sid)  # decoded inside: errors counted

    def _get_many(self, user_id, session_id, values, lists, consistency="strong") -> dict[str, tuple[Any, int]]:
        """:meth:`get_many` with each key's version: ``{key: (value, version)}``."""
        value_keys = [self._key_ids(user_id, session_id, k)[1] for k in serde.check_keys(values, "values")]
        list_keys = [self._key_ids(user_id, session_id, k, is_list=True)[1] for k in serde.check_keys(lists, "lists")]
        sid = keys.pack(user_id, session_id)
        both = set(value_keys) & set(list_keys)
        if both:
            raise ValueError(f"keys {sorted(both)} are asked for both as a value and as a list")
        if not value_keys and not list_keys:
            return {}
        hash_keys = [keys.hash_key(k) for k in (*value_keys, *list_keys)]
        statement, params = sql.select_many(self._table, sid, value_keys, list_keys, hash_keys)
        decode = lambda rows: self._decode_many(sid, value_keys, list_keys, rows)  # noqa: E731
        return self._db.run(lambda cur: (cur.execute(statement, params), decode(cur.fetchall()))[1], "get_many",
                            write=False, consistency=consistency, session=sid)  # decoded inside: errors counted

    def _decode_many(self, sid: str, value_keys: list, list_keys: list, rows: Any) -> dict[str, tuple[Any, int]]:
        by_key: dict[str, list] = {}
        for key, index, data, version in rows:
            by_key.setdefault(key, []).append((index, data, version))
        out: dict[str, tuple[Any, int]] = {}
        for k in value_keys:
            rows = [(False, r[1], r[2]) for r in by_key.get(k, ()) if r[0] == 0]
            rows += [(True, r[1], r[2]) for r in by_key.get(keys.hash_key(k), ())]
            found = self._value_of(sid, k, rows, None)
            if found is not None and not (found[2] and found[0] is None):
                out[k] = found[:2]
        for k in list_keys:
            head = [(-1, r[1], r[2]) for r in by_key.get(keys.hash_key(k), ())]
            items = by_key.get(k, [])
            if head or items:
                out[k] = self._check_list(items + head, sid, k, 0, None, None)[:2]
        return out

    def _get_list(self, user_id, session_id, key, type, offset, limit, consistency="strong") -> tuple[list, int]:
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)
        offset, limit = self._window_of(offset, limit)
        serde.check_type(type)
        items, version, stored = self._db.run(  # decoded inside: its errors are counted
            lambda cur: self._check_list(self._read_list(cur, sid, k, offset, limit), sid, k, offset, limit, type),
            f"get_list {k!r}", write=False, consistency=consistency, session=sid)
        if stored is not None and consistency == "strong":  # a replica's may be behind
            self._hints.put((sid, k), stored)
        return items, version

    def _read_list(self, cur: Any, sid: str, k: str, offset: int, limit: Optional[int]) -> list:
        hk = keys.hash_key(k)
        if offset < 0:
            cur.execute(self._sql["SELECT_TAIL"], (sid, k, -offset, sid, hk))
        elif offset == 0 and limit is None:
            cur.execute(self._sql["SELECT_ITEMS"], (sid, k, sid, k, sid, k, sid, hk))
        else:
            cur.execute(self._sql["SELECT_WINDOW"], (sid, k, offset, _NO_LIMIT if limit is None else limit, sid, hk))
        return cur.fetchall()

    def _check_list(self, rows: Any, sid: str, k: str, offset: int, limit: Optional[int], type
                    ) -> tuple[list, int, Optional[ListHash]]:
        """Items decoded and checked against the hash row read with them; (items, version, hash).

        Rows found damaged make this process forget the list (snapshot, hint) and mark it, so
        that its next save rewrites the rows instead of trusting the hash row (which a row
        damaged by hand still matches)."""
        try:
            return self._checked_list(rows, sid, k, offset, limit, type)
        except CorruptStateError:
            self._forget((sid, k))
            self._damaged.add((sid, k))
            raise

    def _checked_list(self, rows: Any, sid: str, k: str, offset: int, limit: Optional[int], type
                      ) -> tuple[list, int, Optional[ListHash]]:
        if offset == 0 and limit is None and (not rows or len(rows[0]) == 1):
            return self._check_whole(rows, sid, k, type)
        rows = list(rows)
        head = None
        if rows and rows[-1][0] == -1:
            head = rows.pop()
        elif rows and rows[0][0] == -1:
            head = rows.pop(0)
        if len(rows) > 1 and rows[0][0] > rows[-1][0]:
            rows.reverse()  # a tail is read newest first
        stored = ListHash.parse(head[1]) if head is not None else None
        version = int(head[2]) if head is not None else 0
        got = len(rows)
        first, last = (rows[0][0], rows[-1][0]) if rows else (None, None)
        if offset < 0:
            n = stored.n if stored is not None else (last + 1 if rows else 0)
            start = max(0, n + offset)
        else:
            n = stored.n if stored is not None else offset + got
            start = offset
        stop = n if limit is None or offset < 0 else min(n, offset + limit)
        want = max(0, stop - start)
        if got != want or (got and (first != start or last != stop - 1)):
            self._raise_damaged(sid, k, stored, start, stop, got, first, last)
        if offset < 0 and limit is not None:
            rows = rows[:limit]
        return self._decode_items(sid, k, [r[1] for r in rows], start, type), version, stored

    def _check_whole(self, rows: Any, sid: str, k: str, type) -> tuple[list, int, Optional[ListHash]]:
        """:meth:`_check_list` for a whole list read by ``SELECT_ITEMS`` (one column, no index)."""
        stored, version, got = None, 0, len(rows)
        mark = sql.HEAD_MARK
        at = -1 if rows and rows[-1][0].startswith(mark) else (0 if rows and rows[0][0].startswith(mark) else None)
        if at is not None:
            meta, _, head = rows[at][0][1:].partition(mark)
            rows = rows[:-1] if at == -1 else rows[1:]
            got -= 1
            parts = meta.split(",")
            version = int(parts[0])
            first, last = (int(parts[1]), int(parts[2])) if parts[1] else (None, None)
            stored = ListHash.parse(head)
            n = stored.n if stored is not None else got
            if got != n or (n and (first != 0 or last != n - 1)):
                self._raise_damaged(sid, k, stored, 0, n, got, first, last)
        if self._cipher is None and type is None:
            loads = serde.decode
            try:
                return [loads(r[0]) for r in rows], version, stored
            except ValueError:
                pass  # named below
        return self._decode_items(sid, k, [r[0] for r in rows], 0, type), version, stored

    def _decode_items(self, sid: str, k: str, texts: list, first: int, type) -> list:
        """Items' stored texts (indexes from ``first``), decrypted when sealed; a bad row
        raises naming it."""
        loads = serde.decode
        try:
            if self._cipher is not None:
                opened = self._cipher.opener(sid, k)
                return [loads(opened(i, t), type) for i, t in enumerate(texts, first)]
            return [loads(t) for t in texts] if type is None else [loads(t, type) for t in texts]
        except ValueError:
            for i, t in enumerate(texts, first):  # name the unreadable row (JSON, or a sealed row)
                self._decode(sid, k, i, t)
            raise

    @staticmethod
    def _raise_damaged(sid: str, k: str, stored: Optional[ListHash], start, stop, got, first, last) -> None:
        said = f"its hash row says {stored.n} items" if stored is not None else "it has no hash row of this store"
        raise CorruptStateError(
            f"list {k!r} of session {sid!r} is damaged: {said}, but items {start}..{stop - 1} are "
            f"{got} rows numbered {first}..{last}; save the whole list again to repair it",
            sid, k,
        )

    def list_length(self, user_id: Optional[str], session_id: str, key: str, *, consistency: str = "strong") -> int:
        """Number of items, read from the hash row (no scan of the items).

        >>> store.list_length("alice", "chat-1", "memory")  # doctest: +SKIP
        12
        """
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)

        def read(cur: Any) -> int:
            cur.execute(self._sql["SELECT_HASH_ROW"], (sid, keys.hash_key(k)))
            row = cur.fetchone()
            stored = ListHash.parse(row[0] if row else None)
            if stored is not None:
                return stored.n
            cur.execute(self._sql["COUNT_ITEMS"], (sid, k))
            return int(cur.fetchone()[0])

        return self._db.run(read, f"list_length {k!r}", write=False, consistency=consistency, session=sid)

    def pop_list(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None) -> Any:
        """Remove and return the last item of a list, atomically (None when it is empty).

        The hash row stays exact; a concurrent ``append_list`` is never lost, and no item is
        popped twice (both lock the list's hash row).

        >>> store.pop_list("alice", "chat-1", "memory")  # doctest: +SKIP
        {'role': 'assistant', 'text': '...'}
        """
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)
        serde.check_type(type)
        popped = lambda d: None if d is None else self._decode(sid, k, d[0], d[1], type)  # noqa: E731 - in the tx: an item that does not decode is not popped
        value = self._db.run(lambda cur: popped(self._pop_tx(cur, sid, k)), f"pop_list {k!r}", write=True, session=sid)
        self._forget((sid, k))
        return value

    def _pop_tx(self, cur: Any, sid: str, k: str) -> Optional[tuple[int, str]]:
        hk = keys.hash_key(k)
        cur.execute(self._sql["LOCK_HASH_ROW"], (sid, hk))
        row = cur.fetchone()
        stored, dig = self._usable(ListHash.parse(row[0] if row else None))
        if stored is None:  # no hash row of ours: take the rows as they are, then index them
            cur.execute(self._sql["LOCK_ITEMS"], (sid, k))
            have = cur.fetchall()
            if not have:
                return None
            _refuse_a_value(row, have, sid, k, "pop_list")
            rest = [self._plain(sid, k, r[0], r[1]) for r in have[:-1]]
            plan = listsync.plan_rewrite(rest)
            plan.new_hash = dig.of(dig.digests(rest))
            self._apply(cur, sid, k, plan, [None] * len(rest), hash_row_exists=row is not None)
            return have[-1][0], have[-1][1]
        if stored.n == 0:
            return None
        last = stored.n - 1
        cur.execute(self._sql["SELECT_ITEM"], (sid, k, last))
        item = cur.fetchone()
        if item is None:
            raise CorruptStateError(
                f"list {k!r} of session {sid!r} is damaged: its hash row says {stored.n} items but item "
                f"{last} is missing; save the whole list again to repair it", sid, k, last,
            )
        cur.execute(self._sql["DELETE_ITEMS_FROM"], (sid, k, last))
        new_hash = stored.without_last(dig.digest(last, self._plain(sid, k, last, item[0])), dig.empty)
        self._write_list(cur, sid, k, [], new_hash, with_hash=True)
        return last, item[0]

    def transaction(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn(tx)`` in ONE database transaction and return its result.

        ``tx`` offers ``get``, ``get_list``, ``list_length``, ``save``, ``save_list``,
        ``append_list`` and ``delete`` with the store's signatures, across any sessions. Reads
        lock what they read, so a read-modify-write never loses a concurrent update. All or
        nothing: an exception from ``fn`` rolls everything back. ``fn`` is run again on a
        deadlock or a certification conflict, so it must have no effect outside ``tx``.

        Inside ``fn`` write only through ``tx``: a write through the store, or a nested
        ``store.transaction``, raises :class:`NestedTransactionError` at once (it would wait
        for this transaction's own locks); a read through the store is allowed and sees
        committed state only (not ``tx``'s writes, and it locks nothing).

        >>> def bump(tx):
        ...     n = tx.get("alice", "chat-1", "turns", default=0)
        ...     tx.save("alice", "chat-1", "turns", n + 1)
        ...     return n + 1
        >>> store.transaction(bump)  # doctest: +SKIP
        1
        """
        if not callable(fn):
            raise TypeError(f"fn must be a callable taking the transaction, got {type(fn).__name__}")
        touched: set = set()

        def tx(cur: Any) -> T:
            t = Transaction(self, cur)
            try:
                with running(self._db):
                    return fn(t)
            finally:
                touched.update(t.touched)

        try:
            return self._db.run(tx, "transaction", write=True)
        finally:
            for sid, k in touched:
                if k is None:
                    self._forget(session=sid)
                else:
                    self._forget((sid, k))

    def session_lock(self, user_id: Optional[str], session_id: str, timeout: Optional[float] = 10) -> SessionLock:
        """A lease on one session across processes: ``with store.session_lock(u, s):``.

        Only one holder at a time on one server (MySQL ``GET_LOCK``, named from the packed
        session id); another waits up to ``timeout`` seconds (None: forever), then gets
        :class:`LockTimeoutError`. The lock lives on a connection of its own, outside the
        store's pool, so leases never starve the calls they protect; it is not re-entrant. A
        lease whose lock connection dies is lost: the next store call inside the block,
        ``lock.check()`` and the block's end raise :class:`LockLostError`. On a Galera
        cluster ``GET_LOCK`` is local to one node: there, the versioned saves
        (``expected_version``) are the guarantee that holds.

        >>> with store.session_lock("alice", "chat-1", timeout=10):  # doctest: +SKIP
        ...     state = repo_load(); run_agent(state); repo_save(state)
        """
        sid, _ = self._ids(user_id, session_id)
        if timeout is not None:
            check_seconds("timeout", timeout)
        return SessionLock(self._db, locks.lock_name(self._table, sid), sid, timeout)

    # ---- sessions ------------------------------------------------------------------------------

    def exists(self, user_id: Optional[str], session_id: str, *, consistency: str = "strong") -> bool:
        """True while the session has any row.

        >>> store.exists("alice", "chat-1")  # doctest: +SKIP
        True
        """
        sid, _ = self._ids(user_id, session_id)

        def read(cur: Any) -> bool:
            cur.execute(self._sql["SESSION_EXISTS"], (sid,))
            return cur.fetchone() is not None

        return self._db.run(read, "exists", write=False, consistency=consistency, session=sid)

    def delete(self, user_id: Optional[str], session_id: str, key: Optional[str] = None) -> None:
        """Delete the whole session, or one key (a list with its hash row).

        It waits for writers of the session in flight, so nothing they write is left behind.

        >>> store.delete("alice", "chat-1", "memory")  # doctest: +SKIP
        >>> store.delete("alice", "chat-1")  # doctest: +SKIP
        """
        sid, k = self._ids(user_id, session_id, key)
        if k is None:
            self._db.run(lambda cur: self._delete_session_tx(cur, sid), "delete", write=True, session=sid)
            self._forget(session=sid)
        else:
            self._db.run(lambda cur: self._delete_key_tx(cur, sid, k), f"delete {k!r}", write=True, session=sid)
            self._forget((sid, k))

    def _delete_session_tx(self, cur: Any, sid: str) -> int:
        """Delete the session's rows, history and catalog row; returns the rows deleted."""
        cur.execute(self._sql["LOCK_SESSION"], (sid,))
        return cur.execute(self._sql["DELETE_SESSION"], (sid, keys.history_session(sid), sid))

    def _delete_key_tx(self, cur: Any, sid: str, k: str) -> None:
        hk = keys.hash_key(k)
        cur.execute(self._sql["LOCK_HASH_ROW"], (sid, hk))  # waits for a list writer
        cur.execute(self._sql["DELETE_KEY"], (sid, k, hk))
        history.drop(cur, self._q, sid, k)  # the key's archived items go with it
        cur.execute(self._sql["SESSION_EXISTS"], (sid,))  # the catalog follows: touched or gone
        if cur.fetchone():
            self._touch(cur, sid)
        else:  # the last key: the session goes whole (history of keys no longer there too)
            cur.execute(self._sql["CATALOG_DELETE"], (sid,))
            history.drop(cur, self._q, sid)

    def list_session_ids(self, user_id: Optional[str], *, consistency: str = "strong") -> set[str]:
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

        rows = self._db.run(read, "list_session_ids", write=False, consistency=consistency)
        # The exact prefix test also guards tables whose collation is not exact.
        return {r[0][len(prefix) :] for r in rows if r[0].startswith(prefix)}

    def forget_user(self, user_id: Optional[str], *, batch: int = 500) -> int:
        """Erase a user: every row of every session of ``user_id`` (None: the anonymous user),
        in bounded batches (one transaction each), safe to re-run; returns the rows removed.

        Backups keep what they hold. Other users are untouched.

        >>> store.forget_user("alice")  # doctest: +SKIP
        1234
        """
        prefix = keys.user_prefix(user_id)
        catalog.check_count("batch", batch)
        end = prefix[:-1] + ";"
        # the user's sessions, for their history rows: from the catalog and from the data rows
        sids = {r[0] for r in self._db.run(
            lambda cur: (cur.execute(self._sql["USER_SESSIONS_BY_CATALOG"], (keys.CATALOG_SESSION, prefix, end)),
                         cur.fetchall())[1], f"forget_user {user_id!r}", write=False)}
        sids |= {prefix + s for s in self.list_session_ids(user_id)}
        if self.exact_keys:
            statement, params = self._sql["FORGET_USER_BATCH"], (prefix, end, batch)
        else:
            like = sql.sessions_of_user(prefix, exact=False)[1][0]
            statement, params = self._sql["FORGET_USER_BATCH_LIKE"], (like, len(prefix), prefix, batch)
        batches = [(statement, params)]
        batches += [(self._sql["DELETE_SESSION_BATCH"], (keys.history_session(sid), batch)) for sid in sorted(sids)]
        batches.append((self._sql["USER_CATALOG_BATCH"], (keys.CATALOG_SESSION, prefix, end, batch)))
        removed = 0
        for statement, params in batches:
            while True:
                n = self._db.run(lambda cur: cur.execute(statement, params), f"forget_user {user_id!r}", write=True)
                removed += n
                if n < batch:
                    break
        self._forget()
        return removed

    def reencrypt(self, *, batch: int = 500) -> int:
        """Rewrite every row that is not under the keyring's current key (plaintext rows
        included), hash rows too, in bounded transactions; safe beside live writers (a
        concurrent write is never lost or undone) and resumable. Returns the rows rewritten.

        Rotation: ``{k1}`` -> ``{k2 (current), k1}`` everywhere -> ``reencrypt()`` -> ``{k2}``.

        >>> store.reencrypt()  # doctest: +SKIP
        1234
        """
        if self._cipher is None:
            raise ValueError("reencrypt needs a store with encryption=Keyring(...)")
        check_int("batch", batch, 1)
        from .reencrypt import reencrypt

        return reencrypt(self._migration_ctx(), batch)

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
        self._forget()
        return count

    def _remember(self, key: tuple[str, str], snap: Optional[Snapshot]) -> None:
        """Keep what a list save wrote: its snapshot, and its hash row as a hint for appends."""
        self._snapshots.put(key, snap)
        self._hints.put(key, snap.hash if snap is not None else None)
        self._damaged.discard(key)

    def _forget(self, key: Optional[tuple[str, str]] = None, session: Optional[str] = None) -> None:
        self._snapshots.drop(key, session)
        self._hints.drop(key, session)

    # ---- operating the store: catalog, history, retention, transfer, schema, metrics --------

    def _q(self, template: str) -> str:
        """A statement of a concern module, rendered for this table."""
        return sql.render(template, self._table, self.collation)

    def _read(self, fn: Callable[[Any], T], what: str = "read") -> T:
        return self._db.run(fn, what, write=False)

    def sessions(
        self,
        user_id: Any = ALL_USERS,
        *,
        updated_before: Optional[Any] = None,
        updated_after: Optional[Any] = None,
        limit: int = 100,
        cursor: Optional[str] = None,
    ) -> SessionPage:
        """A page of sessions, newest activity first: ``SessionPage(items, next_cursor)``, each
        item a :class:`SessionInfo` (keys, rows, bytes, created_at, updated_at). ``ALL_USERS``
        (the default) lists every user, ``None`` the anonymous one; pass ``next_cursor`` back
        for the next page (None on the last). Times are the server's (``updated_at``).

        >>> page = store.sessions("alice", limit=20)  # doctest: +SKIP
        >>> [(s.session_id, s.rows) for s in page.items], page.next_cursor  # doctest: +SKIP
        ([('chat-2', 3), ('chat-1', 14)], None)
        """
        catalog.check_count("limit", limit)
        if user_id is not ALL_USERS:
            keys.user_prefix(user_id)  # validates
        if cursor is not None and not isinstance(cursor, str):
            raise TypeError(f"cursor must be a str from a SessionPage, got {type(cursor).__name__}")
        before = catalog.check_when("updated_before", updated_before)
        after = catalog.check_when("updated_after", updated_after)
        run = lambda fn: self._db.run(fn, "sessions", write=False)  # noqa: E731
        before = None if before is None else retention.to_server_time(self._db.run, before)
        after = None if after is None else retention.to_server_time(self._db.run, after)
        return catalog.sessions(run, self._q, self.exact_keys, user_id, before, after, limit, cursor)

    def get_history(
        self, user_id: Optional[str], session_id: str, key: str, *, offset: int = 0, limit: Optional[int] = None
    ) -> list[HistoryItem]:
        """What shrinking saves of a list archived (``keep_history=True``), oldest first, as
        ``HistoryItem(value, archived_at)``; readable whatever this store's ``keep_history``.

        >>> [h.value for h in store.get_history("alice", "chat-1", "memory", limit=10)]  # doctest: +SKIP
        """
        sid, k = self._key_ids(user_id, session_id, key, is_list=True)
        offset, limit = self._window_of(offset, limit)
        if offset < 0:
            raise ValueError(f"offset {offset} must be >= 0 for the history")
        return history.read(lambda fn: self._db.run(fn, f"get_history {k!r}", write=False), self._q,
                            sid, k, offset, limit, _NO_LIMIT, self._decode)

    def fork(self, user_id: Optional[str], session_id: str, new_session_id: str, *, new_user_id: Any = SAME_USER) -> int:
        """Copy every row of a session (history included) to a new session in ONE server-side
        statement, atomically; returns the rows copied. ``new_user_id`` defaults to the same
        user (None: anonymous). An existing target raises :class:`SessionExistsError`, an
        unknown source :class:`SessionNotFoundError`.

        >>> store.fork("alice", "chat-1", "chat-1-branch")  # doctest: +SKIP
        15
        """
        src, _ = self._ids(user_id, session_id)
        dst, _ = self._ids(user_id if new_user_id is SAME_USER else new_user_id, new_session_id)
        if src == dst:
            raise SessionExistsError(f"fork: the new session {dst!r} is the source itself")
        return transfer.fork(self._db.run, self._q, src, dst, self._sql["LOCK_SESSION"], self._sql["DELETE_SESSION"],
                             self._reseal if self._cipher is not None else None)

    def export(self, user_id: Any = ALL_USERS, sessions: Optional[Sequence[str]] = None):
        """One JSON line per row (keys: the column names, timestamps included), streamed a
        chunk at a time from ONE consistent snapshot (one connection, as ``mysqldump
        --single-transaction``); ``sessions`` are session ids of ``user_id`` (which they need:
        ``None`` for the anonymous user). Internal rows (catalog, history) come with their sessions.

        >>> with open("rows.jsonl", "w") as f:  # doctest: +SKIP
        ...     f.writelines(line + "\n" for line in store.export("alice"))
        """
        if sessions is not None:
            if isinstance(sessions, str):
                raise TypeError("sessions must be a list of session ids, not one str")
            if user_id is ALL_USERS:
                raise ValueError("export(sessions=...) needs user_id: session ids belong to one user "
                                 "(pass user_id=None for the anonymous user's sessions)")
            sids = list(dict.fromkeys(self._ids(user_id, s)[0] for s in sessions))
            return transfer.export(self._db.hold, self._q, transfer.scopes(user_id, sids, self.exact_keys))
        if user_id is not ALL_USERS:
            keys.user_prefix(user_id)
        return transfer.export(self._db.hold, self._q, transfer.scopes(user_id, None, self.exact_keys))

    def import_rows(self, lines: Any, *, on_conflict: str = "skip", progress: Optional[Callable[[int], None]] = None) -> int:
        """Write rows of an :meth:`export` back, as they were (timestamps included), in batches
        under ``max_allowed_packet``, all in ONE transaction (a bad line, a row too large or a
        lost connection imports nothing); ``on_conflict`` "skip" keeps a key that exists as it
        is, "replace" replaces every row of each key the import holds. Returns the rows
        inserted or changed (importing twice: 0). The catalog of every session imported is
        made right.

        >>> with open("rows.jsonl") as f:  # doctest: +SKIP
        ...     store.import_rows(f)
        """
        n = transfer.import_rows(self._db.run, self._q, lines, on_conflict, self.max_allowed_packet // 2, progress)
        self._forget()
        return n

    def prune(self, older_than: Any, *, user_id: Any = ALL_USERS, dry_run: bool = False, batch: int = 500,
              progress: Optional[Callable[[int, int], None]] = None) -> PruneReport:
        """Delete whole sessions with no write since ``older_than`` (a timedelta before the
        server's now, or a datetime), ``batch`` sessions per short transaction, with their
        history; ``dry_run`` deletes nothing. ``progress(done, total)`` is called per batch.

        >>> store.prune(timedelta(days=30))  # doctest: +SKIP
        PruneReport(sessions=1200, rows=48000)
        """
        catalog.check_count("batch", batch)
        if user_id is not ALL_USERS:
            keys.user_prefix(user_id)
        when = retention.cutoff(self._db.run, older_than)
        report = retention.prune(self._db.run, self._q, self.exact_keys, user_id, when, bool(dry_run), batch, progress)
        if not dry_run and report.sessions:
            self._forget()
        return report

    def _migration_ctx(self) -> migrations.Ctx:
        return migrations.Ctx(self._db.run, self._q, self.database_name, self.table_name, self.collation,
                              self.max_allowed_packet, self._plain, self._seal, self._digester_of, self._dig,
                              self._cipher is not None, self._forget)

    def migrate(self, dry_run: bool = False) -> list:
        """Apply the schema steps this table still needs (each idempotent, recorded); returns
        them (``name``, ``sql``), ``[]`` when there is nothing to do; ``dry_run`` only lists.

        >>> [s.name for s in store.migrate(dry_run=True)]  # doctest: +SKIP
        ['0003_activity_index', '0004_session_catalog']
        """
        steps = migrations.migrate(self._migration_ctx(), bool(dry_run))
        if steps and not dry_run:
            self._db.run(lambda cur: self._refresh_schema(cur), "migrate", write=False)
        return steps

    def _refresh_schema(self, cur: Any) -> None:
        cur.execute(sql.TABLE_COLUMNS, (self.database_name, self.table_name))
        columns = dict(cur.fetchall())
        self.exact_keys = {columns.get("session_id"), columns.get("state_key")} <= set(sql.EXACT_COLLATIONS)
        self.pads_spaces = not self.exact_keys

    def doctor(self, fix: bool = False) -> list:
        """Check the table: schema, every list against its hash row, JSON, the catalog; returns
        the :class:`Problem` s found (empty when healthy); ``fix=True`` repairs what is safe
        (and marks those ``fixed``).

        >>> [p.message for p in store.doctor()]  # doctest: +SKIP
        []
        """
        problems = migrations.doctor(self._migration_ctx(), bool(fix))
        if fix:
            self._forget()
            self._db.run(lambda cur: self._refresh_schema(cur), "doctor", write=False)
        return problems

    def metrics(self) -> dict:
        """Counters since the store opened: saves by kind, rows and bytes written, reads,
        writes, retries by error number, errors by class, stale-version conflicts, pool wait
        and latency per operation.

        >>> store.metrics()["saves"]["shrink"]  # doctest: +SKIP
        3
        """
        return self._metrics.snapshot(self._db.stats)

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """Retries and reconnects so far (for tests, benchmarks and monitoring)."""
        return self._db.stats

    def close(self) -> None:
        """Close the pools this store created (a pool that was given is left open)."""
        self._db.close()
        self._forget()

    def __enter__(self) -> "MysqlAgentStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
