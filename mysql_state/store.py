"""MysqlAgentStateStore: the front door, and the source of truth for the async store.

Each public method checks its arguments (:mod:`mysql_state.args`: ids packed and validated,
values encoded), then makes ONE call: a data call goes to :class:`~mysql_state.calls.Calls`,
which runs its engine function through the connector as one transaction and keeps what the
process remembers of lists right around it (:mod:`~mysql_state.memory`); an operator's call
goes to its concern module (catalog, history, transfer, retention, migrations, reencrypt),
given the connector and the table context. The engines hold the SQL work, as functions of
``(cursor, table context, ...)``: :mod:`~mysql_state.values` (values, compare-and-set),
:mod:`~mysql_state.list_write` (list saves, appends, pops, ``save_many``),
:mod:`~mysql_state.list_read` (reads and damage checks), :mod:`~mysql_state.sessions`
(exists, deletes, erasure), :mod:`~mysql_state.schema` (set-up). The table context
(:class:`~mysql_state.table.Table`) carries what they all share; the constructors' wiring
(pools, hosts, replicas, metrics) is :mod:`~mysql_state.wiring`'s.
"""
from __future__ import annotations

import collections.abc
import contextlib
import inspect
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

from . import args, catalog, history, keys, list_write, locks, migrations, retention, schema, serde
from . import sessions, transfer, wiring
from . import url as url_module  # (``url`` is a parameter name of from_url)
from . import values as value_engine  # (``values`` is a parameter name of the public API)
from .catalog import ALL_USERS, SessionPage
from .crypto import Keyring
from .calls import Calls
from .errors import SessionExistsError, StaleStateError
from .history import HistoryItem
from .list_write import ListWrite
from .listsync import Plan
from .locks import SessionLock
from .memory import ListMemory
from .migrations import DoctorFinding, MigrationStep
from .checks import check_count, check_int, check_seconds
from .pool import DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT, DEFAULT_RETRIES, Stats
from .reencrypt import reencrypt
from .replicas import DEFAULT_SESSION_WAIT
from .results import UNVERSIONED, SavedMany, SaveReport, VersionedState
from .retention import PruneReport
from .sealer import sealer_for
from .table import Table
from .transaction import Transaction, guard

__all__ = ["MysqlAgentStateStore", "VersionedState", "SavedMany", "SaveReport", "UNVERSIONED", "SAME_USER"]

T = TypeVar("T")
DEFAULT_SNAPSHOT_BYTES = 64 * 1024 * 1024
#: ``fork``'s default ``new_user_id``: the copy belongs to the same user as the original.
SAME_USER = args.SAME_USER


class MysqlAgentStateStore:
    """Agent state in one MySQL table, readable by AgentScope Java's ``MysqlAgentStateStore``.

    A single value is one row at ``item_index = 0``; a list is one row per item plus a
    ``"<key>:_hash"`` row used for change detection. ``(user_id, session_id)`` is packed as
    ``"<user>:<session>"`` (``__anon__`` when the user is None or blank).

    >>> store = MysqlAgentStateStore.from_url(url, create_if_not_exist=True)
    >>> store.save_list("alice", "chat-1", "memory", [{"role": "user", "text": "hi"}])
    >>> store.get_list("alice", "chat-1", "memory")
    [{'role': 'user', 'text': 'hi'}]
    >>> store.close()
    """

    supports_versioning = True

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
        per-process list snapshots that make ``save_list`` cheap, and again for what whole
        reads keep so that the next read is sent only what is new (0 turns both off).
        ``encryption`` (a :class:`Keyring`) encrypts every value and list item at rest
        (AES-256-GCM, see :mod:`mysql_state.crypto`); rows written without it read as they are.
        ``keep_history`` archives what a list save drops, shrunk or replaced (see :meth:`get_history`).
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
        self.database_name, self.table_name = self._options(database_name, table_name, snapshot_bytes,
                                                            create_if_not_exist, encryption, keep_history)
        sealer = sealer_for(encryption, self.table_name)
        # Before every call: no write from inside this store's own transaction(fn), none in a lost lease.
        wired = parts.connect(f"the store of `{self.database_name}`.`{self.table_name}`", guard=guard)
        self._db, self._metrics = wired.db, wired.metrics
        #: Connections per pool (None for a given pool); the async store sizes its threads to it.
        self.pool_size: Optional[int] = wired.pool_size
        self._memory = ListMemory(snapshot_bytes)  # snapshots, hints, damaged lists: cheap saves, repairs
        db, tn = self.database_name, self.table_name
        try:  # the primary only: replicas get no DDL
            found = self._db.run(lambda cur: schema.set_up(cur, db, tn, create_if_not_exist),
                                 f"open table `{db}`.`{tn}`", write=True, session=None)
        except BaseException:
            self._db.close()  # and the replicas' connector, behind its router
            raise
        #: The table context every engine is given: statements, the sealer, the options.
        self.table = Table(db, tn, *found, sealer, keep_history=bool(keep_history), isolate_each=not self._db.owned)
        self._calls = Calls(self._db, self.table, self._memory, self._metrics)  # each call after its checks

    @staticmethod
    def _options(database_name: Optional[str], table_name: Optional[str], snapshot_bytes: int,
                 create_if_not_exist: Any, encryption: Any, keep_history: Any) -> tuple[str, str]:
        """The options both constructors take, checked (each error names its option); the
        database and table names, defaults filled in. ``from_url`` checks them before it makes
        any pool, and again with the URL's database when it opens."""
        names = (keys.identifier(database_name, "database name", keys.DEFAULT_DATABASE),
                 keys.identifier(table_name, "table name", keys.DEFAULT_TABLE))
        check_int("snapshot_bytes", snapshot_bytes, 0)
        args.flag(create_if_not_exist, "create_if_not_exist")
        args.flag(keep_history, "keep_history")
        if encryption is not None and not isinstance(encryption, Keyring):
            raise TypeError(f"encryption must be a mysql_state.Keyring, got {type(encryption).__name__}")
        return names

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
        connect_timeout: Optional[float] = None,
        read_timeout: Optional[float] = None,
        write_timeout: Optional[float] = None,
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
        Other keywords go to ``pymysql.connect``. The timeouts (seconds) are the keywords', else
        the URL's (``?connect_timeout=3``), else 5, 30 and 30. A host list (``h1:3306,h2:3306,h3:3306``)
        is an order of preference: the store uses the first host that answers and fails
        over to the next (:mod:`mysql_state.hosts`). ``replica_urls`` (read-only users
        suffice) serve reads made with ``consistency="session"`` or ``"eventual"``
        (:mod:`mysql_state.replicas`); their database is this store's.

        >>> with MysqlAgentStateStore.from_url(url, create_if_not_exist=True) as s:
        ...     s.exists("alice", "from-url-1")
        False
        """
        cls._options(database_name, table_name, snapshot_bytes, create_if_not_exist, encryption, keep_history)
        url_module.check_keywords(connect_kwargs, inspect.signature(cls.from_url).parameters)
        parts, url_database = wiring.from_url(
            url, replica_urls, pool_size=pool_size, pool_timeout=pool_timeout, connect_timeout=connect_timeout,
            read_timeout=read_timeout, write_timeout=write_timeout, retries=retries, session_wait=session_wait,
            **connect_kwargs)
        chosen = database_name if database_name is not None and database_name.strip() else url_database
        return cls._assembled(parts, chosen, table_name, create_if_not_exist, snapshot_bytes, encryption, keep_history)

    # ---- single values -------------------------------------------------------------------------

    def save(self, user_id: Optional[str], session_id: str, key: str, value: Any) -> None:
        """Store one value at ``key`` (its version grows by one); a list under the key is removed.

        >>> store.save("alice", "save-1", "summary", {"text": "hi"})
        >>> store.get("alice", "save-1", "summary")
        {'text': 'hi'}
        """
        self.save_if_version(user_id, session_id, key, value, UNVERSIONED)

    def save_if_version(self, user_id: Optional[str], session_id: str, key: str, value: Any,
                        expected_version: int) -> int:
        """Compare-and-set: write only if the key's version is ``expected_version`` (``0``:
        absent, ``UNVERSIONED``: whatever it is); the new version, or ``UNVERSIONED`` when
        nothing was written. A list's version is its hash row's; a value written removes it.

        >>> store.save_if_version("alice", "cas-1", "plan", {"step": 1}, 0)  # 0: only while absent
        1
        >>> store.save_if_version("alice", "cas-1", "plan", {"step": 2}, 0)  # taken: nothing written
        -1
        >>> store.save_if_version("alice", "cas-1", "plan", {"step": 2}, 1)
        2
        """
        want = args.version(expected_version, "expected_version")
        sid, k, text, size = args.prepare_value(self.table, user_id, session_id, key, value)
        return self._calls.save_value(sid, k, text, size, want)

    def get(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None,
            default: Any = None, *, consistency: str = "strong") -> Any:
        """The value at ``key`` (an instance of ``type`` when given), or ``default``: the row at
        ``item_index = 0``, as in the Java store (for a list, its first item). ``consistency``
        (every read has it): ``"strong"`` reads the primary, ``"session"``/``"eventual"`` may
        read a replica (:mod:`mysql_state.replicas`).

        >>> store.save("alice", "get-1", "summary", {"text": "hi"})
        >>> store.get("alice", "get-1", "summary")
        {'text': 'hi'}
        >>> store.get("alice", "get-1", "missing", default="none yet")
        'none yet'
        """
        found = self._read_value(user_id, session_id, key, type, consistency)
        return default if found is None or found.empty else found.value

    def get_versioned(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
                      consistency: str = "strong") -> VersionedState:
        """The value and its version (a list's: its hash row's, which ``save_if_version``
        checks); ``(None, 0)`` when absent.

        >>> store.save("alice", "versioned-1", "plan", {"step": 1})
        >>> store.get_versioned("alice", "versioned-1", "plan")
        VersionedState(value={'step': 1}, version=1)
        >>> store.get_versioned("alice", "versioned-1", "missing")
        VersionedState(value=None, version=0)
        """
        found = self._read_value(user_id, session_id, key, type, consistency)
        return VersionedState(None, 0) if found is None else VersionedState(found.value, found.version)

    def _read_value(self, user_id, session_id, key, model, consistency) -> Optional[value_engine.ValueRead]:
        sid, k = args.key_ids(self.table, user_id, session_id, key)
        return self._calls.read_value(sid, k, serde.check_type(model), consistency)

    def get_prefix(self, user_id: Optional[str], session_id: str, prefix: str = "", *, versioned: bool = False,
                   consistency: str = "strong") -> dict[str, Any]:
        """The single values of one session whose key starts with ``prefix`` (``""``: all), in
        key order, read as ONE primary-key range (indexes kept as values: ADK's, LangGraph's);
        keys holding a list are left out; ``versioned=True`` gives :class:`VersionedState` s.

        >>> store.save("alice", "prefix-1", "idx:a", 1)
        >>> store.save("alice", "prefix-1", "idx:b", 2)
        >>> store.save("alice", "prefix-1", "other", 3)
        >>> store.get_prefix("alice", "prefix-1", "idx:")
        {'idx:a': 1, 'idx:b': 2}
        """
        sid, _ = args.ids(self.table, user_id, session_id)
        args.flag(versioned, "versioned")
        keys.check_text(prefix, "prefix")
        found = self._calls.prefix_values(sid, prefix, consistency)
        return {k: VersionedState(v, n) if versioned else v for k, v, n in found}

    # ---- lists ---------------------------------------------------------------------------------

    def save_list(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any]) -> None:
        """Store the whole list at ``key``, writing only the items that changed (an empty list
        clears it; a shorter one removes the rows past its end).

        >>> store.save_list("alice", "list-1", "memory", messages)
        >>> store.get_list("alice", "list-1", "memory")
        [{'role': 'user', 'text': 'hi'}, {'role': 'assistant', 'text': 'hello'}]
        >>> store.save_list("alice", "list-1", "memory", messages[:1])  # shorter: the tail row is removed
        >>> store.list_length("alice", "list-1", "memory")
        1
        """
        self._save_list(user_id, session_id, key, values)

    def save_list_report(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any], *,
                         expected_version: Optional[int] = None) -> SaveReport:
        """:meth:`save_list`, returning what it wrote: a :class:`SaveReport` (``kind``,
        ``rows_written``, the new ``version``). ``expected_version`` makes it a compare-and-set
        (as :meth:`save_list_if_version`; ``0``: the list is absent): another version raises
        :class:`StaleStateError`, nothing written.

        >>> store.save_list_report("alice", "report-1", "memory", messages)
        SaveReport(kind='rewrite', rows_written=2, version=1, indexes=(0, 1), delete_from=None)
        >>> store.save_list_report("alice", "report-1", "memory", messages + ["bye"], expected_version=1)
        SaveReport(kind='append', rows_written=1, version=2, indexes=(2,), delete_from=None)
        """
        want = None if expected_version is None else args.version(expected_version, "expected_version")
        w, plan = self._save_list(user_id, session_id, key, values, want)
        return list_write.report(plan, w.version)

    def save_list_if_version(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any],
                             expected_version: int) -> int:
        """:meth:`save_list` as a compare-and-set, with the contract of :meth:`save_if_version`
        (the version is the list's hash row's, as :meth:`get_list_versioned` reads it).

        >>> store.save_list_if_version("alice", "list-cas-1", "memory", messages, 0)
        1
        >>> store.save_list_if_version("alice", "list-cas-1", "memory", [], 0)  # stale: nothing written
        -1
        """
        want = args.version(expected_version, "expected_version")
        try:
            return self._save_list(user_id, session_id, key, values, want)[0].version
        except StaleStateError:
            return UNVERSIONED

    def _save_list(self, user_id, session_id, key, items, expected: Optional[int] = None) -> tuple[ListWrite, Plan]:
        w = self._list_write(user_id, session_id, key, items, expected)
        return w, self._calls.save_list(w)

    def _list_write(self, user_id, session_id, key, items, expected: Optional[int] = None,
                    parameter: str = "values") -> ListWrite:
        """A list save checked and encoded, with this process's snapshot of the list."""
        sid, k, items, blob = args.prepare_list(self.table, user_id, session_id, key, items, parameter)
        return self._calls.new_list_write(sid, k, items, blob, expected)

    def save_many(self, user_id: Optional[str], session_id: str, values: Optional[Mapping[str, Any]] = None,
                  lists: Optional[Mapping[str, Sequence[Any]]] = None, *,
                  expected_versions: Optional[Mapping[str, int]] = None) -> SavedMany:
        """Save values and lists of one session in ONE transaction (all or nothing), lists as
        :meth:`save_list` does: a :class:`SavedMany` (each list's :class:`SaveReport`, every new
        version in ``.versions``). ``expected_versions`` (key -> version read, 0: absent) makes
        it a compare-and-set: another version raises :class:`StaleStateError`, nothing written.

        >>> saved = store.save_many("alice", "many-1", values={"plan": {"step": 1}}, lists={"memory": messages})
        >>> saved["memory"].rows_written, saved.versions
        (2, {'memory': 1, 'plan': 1})
        """
        value_map, list_map, expected = args.save_many(values, lists, expected_versions)
        writes = [self._list_write(user_id, session_id, k, v, expected.get(k), f"lists[{k!r}]")
                  for k, v in sorted(list_map.items())]
        t, sid = self.table, keys.pack(user_id, session_id)
        prepared = [args.prepare_value(t, user_id, session_id, k, v) for k, v in sorted(value_map.items())]
        if not writes and not prepared:
            return SavedMany()
        return self._calls.save_many(sid, writes, prepared, expected, f"save_many {sorted(list_map) + sorted(value_map)}")

    def append_list(self, user_id: Optional[str], session_id: str, key: str, items: Sequence[Any]) -> int:
        """Add ``items`` after the end of the list without re-sending it; returns the new length.

        >>> store.save_list("alice", "append-1", "memory", messages)
        >>> store.append_list("alice", "append-1", "memory", [{"role": "user", "text": "bye"}])
        3
        """
        sid, k, datas = args.prepare_append(self.table, user_id, session_id, key, items)
        if not datas:  # its length, as list_length reads it; a value under the key is refused
            return self._calls.length(sid, k, "append_list")
        return self._calls.append_list(sid, k, datas)

    def append_lists(self, user_id: Optional[str], session_id: str, appends: Mapping[str, Sequence[Any]], *,
                     at: Optional[Mapping[str, int]] = None, values: Optional[Mapping[str, Any]] = None
                     ) -> dict[str, int]:
        """Append to several lists of one session (``{key: items}``, each as :meth:`append_list`)
        and save ``values`` (``{key: value}``, as :meth:`save`) beside, in ONE transaction (all
        or nothing); the new length per list key. ``at`` (``{key: length}``) makes the appends a
        compare-and-set: a list of another length raises :class:`StaleStateError`, nothing
        written, and so does one of that length that is not the list this process last read or
        wrote (another writer rewrote it to that length). When this process knows every list's
        hash row (it wrote or read the list last) and every key of ``values`` is new, it is ONE
        statement carrying its COMMIT: one round trip (a value already there: the locked way).

        >>> store.delete("alice", "lists-1")
        >>> store.append_lists("alice", "lists-1", {"memory": messages, "steps": ["planned"]},
        ...                    values={"plan": {"step": 1}})
        {'memory': 2, 'steps': 1}
        >>> store.append_lists("alice", "lists-1", {"memory": [{"role": "user", "text": "bye"}]}, at={"memory": 2})
        {'memory': 3}
        """
        sid, todo, want, value_rows = args.append_lists(self.table, user_id, session_id, appends, at, values)
        return self._calls.append_lists(sid, todo, want, value_rows)

    def get_list(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
                 offset: int = 0, limit: Optional[int] = None, consistency: str = "strong") -> list[Any]:
        """The list's items in order; ``offset``/``limit`` read a window in one query, a negative
        ``offset`` counts from the end. Rows that disagree with the list's hash row (a missing
        item) raise :class:`CorruptStateError`.

        >>> store.save_list("alice", "window-1", "memory", ["a", "b", "c", "d"])
        >>> store.get_list("alice", "window-1", "memory", offset=1, limit=2)
        ['b', 'c']
        >>> store.get_list("alice", "window-1", "memory", offset=-1)
        ['d']
        """
        return self._get_list(user_id, session_id, key, type, offset, limit, consistency)[0]

    def get_list_versioned(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
                           consistency: str = "strong") -> VersionedState:
        """The whole list and its version, read in one statement; ``([], 0)`` when absent (a
        list left without a hash row reads as version 1: 0 is only ever "absent").

        >>> store.save_list("alice", "list-versioned-1", "memory", ["a", "b"])
        >>> store.get_list_versioned("alice", "list-versioned-1", "memory")
        VersionedState(value=['a', 'b'], version=1)
        """
        return VersionedState(*self._get_list(user_id, session_id, key, type, 0, None, consistency))

    def _get_list(self, user_id, session_id, key, model, offset, limit, consistency) -> tuple[list, int]:
        sid, k = args.key_ids(self.table, user_id, session_id, key, is_list=True)
        offset, limit = args.window(offset, limit)
        return self._calls.get_list(sid, k, serde.check_type(model), offset, limit, consistency)

    def get_many(self, user_id: Optional[str], session_id: str, values: Sequence[str] = (),
                 lists: Sequence[str] = (), *, versioned: bool = False, consistency: str = "strong") -> dict[str, Any]:
        """Values and whole lists of one session in ONE statement (one snapshot, one round trip);
        missing keys are left out; ``versioned=True`` gives :class:`VersionedState` s.

        >>> store.save_many("alice", "get-many-1", values={"plan": {"step": 1}}, lists={"memory": ["a"]})
        {'memory': SaveReport(...)}
        >>> store.get_many("alice", "get-many-1", values=["plan", "missing"], lists=["memory"])
        {'plan': {'step': 1}, 'memory': ['a']}
        """
        sid, value_keys, list_keys = args.many_keys(self.table, user_id, session_id, values, lists)
        args.flag(versioned, "versioned")
        if not value_keys and not list_keys:
            return {}
        found = self._calls.get_many(sid, value_keys, list_keys, consistency)
        return {k: VersionedState(*vv) if versioned else vv[0] for k, vv in found.items()}

    def list_length(self, user_id: Optional[str], session_id: str, key: str, *, consistency: str = "strong") -> int:
        """Number of items, read from the hash row (no scan of the items); a list without one of
        this store (the Java store's, or none) has its rows counted, and a gap in their indexes
        raises :class:`CorruptStateError`.

        >>> store.save_list("alice", "length-1", "memory", messages)
        >>> store.list_length("alice", "length-1", "memory")
        2
        """
        sid, k = args.key_ids(self.table, user_id, session_id, key, is_list=True)
        return self._calls.length(sid, k, None, consistency)

    def key_kind(self, user_id: Optional[str], session_id: str, key: str, *,
                 consistency: str = "strong") -> Optional[str]:
        """What ``key`` holds: ``"list"`` (a hash row, or items without one), ``"value"`` (a single
        row 0), or None when absent; one statement, as Redis's TYPE. A list of one item and a
        value read alike through ``get_list``: this tells them apart.

        >>> store.save("alice", "kind-1", "plan", {"step": 1})
        >>> store.save_list("alice", "kind-1", "memory", ["only item"])
        >>> [store.key_kind("alice", "kind-1", k) for k in ("plan", "memory", "nothing")]
        ['value', 'list', None]
        """
        sid, k = args.key_ids(self.table, user_id, session_id, key)
        return self._calls.key_kind(sid, k, consistency)

    def pop_list(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None) -> Any:
        """Remove and return the last item, atomically (None when empty); the hash row stays
        exact, a concurrent ``append_list`` is never lost, no item is popped twice.

        >>> store.save_list("alice", "pop-1", "memory", ["a", "b"])
        >>> store.pop_list("alice", "pop-1", "memory")
        'b'
        >>> store.get_list("alice", "pop-1", "memory")
        ['a']
        """
        sid, k = args.key_ids(self.table, user_id, session_id, key, is_list=True)
        return self._calls.pop_list(sid, k, serde.check_type(type))

    # ---- transactions and locks ----------------------------------------------------------------

    def transaction(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn(tx)`` in ONE database transaction, across sessions, and return its result;
        ``tx`` (a :class:`Transaction`) has the store's reads and writes, reads lock what they
        read, and ``fn`` may run again on a deadlock (see :mod:`mysql_state.transaction`).
        Inside ``fn`` write only through ``tx``: a write through the store, or a nested
        ``store.transaction``, raises :class:`NestedTransactionError` at once.

        >>> store.save("alice", "tx-inbox", "next", {"text": "hi"})
        >>> def move(tx):
        ...     item = tx.get("alice", "tx-inbox", "next")
        ...     tx.append_list("alice", "tx-chat", "memory", [item])
        ...     tx.delete("alice", "tx-inbox", "next")
        ...     return item
        >>> store.transaction(move)
        {'text': 'hi'}
        >>> store.get_list("alice", "tx-chat", "memory"), store.exists("alice", "tx-inbox")
        ([{'text': 'hi'}], False)
        """
        if fn is None:
            raise TypeError("fn must be a callable taking the transaction, got None")
        args.callback(fn, "fn")
        return self._calls.transaction(fn)

    def session_lock(self, user_id: Optional[str], session_id: str, timeout: Optional[float] = 10) -> SessionLock:
        """A lease on one session across processes (``GET_LOCK``, one holder per server; wait up
        to ``timeout`` seconds, None: forever): ``with store.session_lock(u, s):``. The lock lives
        on a connection of its own; a lease whose connection dies is lost, and the next store call
        inside the block raises :class:`LockLostError` (:mod:`mysql_state.locks`).

        >>> with store.session_lock("alice", "lock-1", timeout=5):
        ...     store.save("alice", "lock-1", "turn", 1)
        >>> store.get("alice", "lock-1", "turn")
        1
        """
        sid, _ = args.ids(self.table, user_id, session_id)
        if timeout is not None:
            check_seconds("timeout", timeout)
        return SessionLock(self._db, locks.lock_name(self.table.quoted, sid), sid, timeout)

    # ---- sessions ------------------------------------------------------------------------------

    def exists(self, user_id: Optional[str], session_id: str, *, consistency: str = "strong") -> bool:
        """True while the session has any row.

        >>> store.exists("alice", "exists-1")
        False
        >>> store.save("alice", "exists-1", "plan", 1)
        >>> store.exists("alice", "exists-1")
        True
        """
        sid, _ = args.ids(self.table, user_id, session_id)
        return self._calls.exists(sid, consistency)

    def delete(self, user_id: Optional[str], session_id: str, key: Optional[str] = None) -> None:
        """Delete the whole session, or one key (a list with its hash row), after the session's
        writers in flight (nothing they write is left behind).

        >>> store.save("alice", "delete-1", "plan", 1)
        >>> store.save_list("alice", "delete-1", "memory", ["a"])
        >>> store.delete("alice", "delete-1", "memory")  # one key
        >>> store.get_list("alice", "delete-1", "memory"), store.get("alice", "delete-1", "plan")
        ([], 1)
        >>> store.delete("alice", "delete-1")  # the whole session
        >>> store.exists("alice", "delete-1")
        False
        """
        sid, k = args.ids(self.table, user_id, session_id, key)
        self._calls.delete(sid, k)

    def delete_keys(self, user_id: Optional[str], session_id: str, keys: Sequence[str], *,
                    maintenance: bool = False) -> int:
        """Delete ``keys`` of one session (values, or lists with their hash rows) in ONE
        transaction, as :meth:`delete` does each; returns the rows removed. With
        ``maintenance=True`` (a TTL sweep, a prune) the deletes do not look like activity: the
        session's catalog row (``updated_at``, which ``sessions()`` and :meth:`prune` read) and
        every other row are left as they are; a session left empty goes whole either way.

        >>> store.save("alice", "chat-1", "draft", "hi")
        >>> store.delete_keys("alice", "chat-1", ["draft", "absent"], maintenance=True)
        1
        """
        sid, ks = args.delete_keys(self.table, user_id, session_id, keys, maintenance)
        return self._calls.delete_keys(sid, ks, maintenance) if ks else 0

    def list_session_ids(self, user_id: Optional[str], *, consistency: str = "strong") -> set[str]:
        """The session ids of one user (None: the anonymous user).

        >>> store.save("dave", "s-1", "plan", 1)
        >>> store.save("dave", "s-2", "plan", 1)
        >>> sorted(store.list_session_ids("dave"))
        ['s-1', 's-2']
        """
        return self._calls.session_ids(keys.user_prefix(user_id), consistency)

    def forget_user(self, user_id: Optional[str], *, batch: int = 500,
                    progress: Optional[Callable[[int, Optional[int]], None]] = None) -> int:
        """Erase a user (None: the anonymous one): every row of every session, history and
        catalog included, each session whole as :meth:`delete` deletes one, ``batch`` sessions
        per transaction, safe to re-run; the rows removed. A blank ``user_id`` is refused
        (elsewhere it names the anonymous user): an empty variable erases nothing here.
        ``progress(done, total)`` per batch: the sessions erased, of those found.

        >>> store.save("erin", "s-1", "plan", 1)
        >>> store.save_list("erin", "s-2", "memory", ["a"])
        >>> store.forget_user("erin", progress=lambda done, total: print(f"{done}/{total} sessions"))
        0/2 sessions
        2/2 sessions
        5
        >>> store.list_session_ids("erin")
        set()
        """
        prefix = args.erasing_user(user_id, "forget_user", "nothing was erased")
        check_count("batch", batch)
        args.callback(progress, "progress")
        try:
            return sessions.forget_user(self._db, self.table, prefix, batch, f"forget_user {user_id!r}", progress)
        finally:  # a callback that raised too: the sessions erased before it are gone
            self._forget()

    def truncate_all_sessions(self) -> int:
        """Remove every row (``TRUNCATE TABLE``); returns how many callers' rows there were.

        >>> scratch = MysqlAgentStateStore.from_url(url, table_name="scratch", create_if_not_exist=True)
        >>> scratch.save("alice", "truncate-1", "plan", 1)
        >>> scratch.truncate_all_sessions()
        1
        >>> scratch.exists("alice", "truncate-1")
        False
        >>> scratch.close()
        """
        return self._calls.truncate()

    def _forget(self, key: Optional[tuple[str, str]] = None, session: Optional[str] = None) -> None:
        """Drop what this process remembers of a list, a session, or (no argument) everything."""
        self._memory.forget(key, session)

    # ---- operating the store: encryption, catalog, history, transfer, retention, schema ------

    def reencrypt(self, *, batch: int = 500, progress: Optional[Callable[[int, Optional[int]], None]] = None) -> int:
        """Rewrite every row not under the keyring's current key (hash rows and plain rows too),
        in bounded transactions, safe beside live writers and resumable; the rows rewritten.
        ``progress(done, None)`` per batch: the rows rewritten so far (no total).

        >>> import os
        >>> from mysql_state import Keyring
        >>> k1, k2 = os.urandom(32), os.urandom(32)
        >>> with MysqlAgentStateStore.from_url(url, table_name="sealed", create_if_not_exist=True,
        ...                                    encryption=Keyring({"k1": k1}, current="k1")) as s:
        ...     s.save_list("alice", "reencrypt-1", "memory", messages)
        >>> with MysqlAgentStateStore.from_url(url, table_name="sealed",
        ...                                    encryption=Keyring({"k2": k2, "k1": k1}, current="k2")) as s:
        ...     s.reencrypt(), s.get_list("alice", "reencrypt-1", "memory") == messages
        (3, True)
        """
        if not self.table.sealer.encrypted:
            raise ValueError("reencrypt needs a store with encryption=Keyring(...)")
        check_count("batch", batch)
        args.callback(progress, "progress")
        return reencrypt(migrations.Ctx(self._db, self.table, self._forget), batch, progress)

    def sessions(self, user_id: Any = ALL_USERS, *, updated_before: Optional[Any] = None,
                 updated_after: Optional[Any] = None, limit: int = 100, cursor: Optional[str] = None) -> SessionPage:
        """A page of sessions, newest activity first: ``SessionPage(items, next_cursor)`` of
        :class:`SessionInfo`; ``ALL_USERS`` (default) lists every user, None the anonymous one;
        pass ``next_cursor`` back for the next page. Times are the server's. Pages are not a
        snapshot: a session written while you page moves ahead of the cursor, so a walk misses
        one written after it began and before its page was read (never lists one twice).

        >>> store.save("frank", "s-1", "plan", 1)
        >>> store.save_list("frank", "s-2", "memory", ["a", "b"])
        >>> page = store.sessions("frank")
        >>> [(s.session_id, s.keys) for s in page.items], page.next_cursor
        ([('s-2', ['memory']), ('s-1', ['plan'])], None)
        """
        before, after = args.session_page(user_id, limit, cursor, updated_before, updated_after)
        before = None if before is None else retention.to_server_time(self._db.run, before)
        after = None if after is None else retention.to_server_time(self._db.run, after)
        return catalog.sessions(self._db, self.table, user_id, before, after, limit, cursor)

    def get_history(self, user_id: Optional[str], session_id: str, key: str, *, offset: int = 0,
                    limit: Optional[int] = None) -> list[HistoryItem]:
        """What saves of a list dropped (``keep_history=True``), oldest first, as
        ``HistoryItem(value, archived_at)``; readable whatever this store's ``keep_history``.

        >>> with MysqlAgentStateStore.from_url(url, keep_history=True) as s:
        ...     s.save_list("alice", "history-1", "memory", ["a", "b", "c"])
        ...     s.save_list("alice", "history-1", "memory", ["a"])
        >>> [h.value for h in store.get_history("alice", "history-1", "memory")]
        ['b', 'c']
        """
        t = self.table
        sid, k = args.key_ids(t, user_id, session_id, key, is_list=True)
        given = offset
        offset, limit = args.window(offset, limit)
        if offset < 0:
            raise ValueError(f"offset {given} must be >= 0 for the history")
        return history.read(self._db, t, sid, k, offset, limit)

    def fork(self, user_id: Optional[str], session_id: str, new_session_id: str, *,
             new_user_id: Any = SAME_USER) -> int:
        """Copy every row of a session (history included) to a new one in ONE server-side
        statement; the rows copied. ``new_user_id`` defaults to the same user; an existing
        target raises :class:`SessionExistsError`, an unknown source :class:`SessionNotFoundError`.

        >>> store.save_list("alice", "fork-1", "memory", messages)
        >>> store.fork("alice", "fork-1", "fork-2")
        3
        >>> store.get_list("alice", "fork-2", "memory") == messages
        True
        """
        t = self.table
        src, _ = args.ids(t, user_id, session_id)
        dst, _ = args.ids(t, user_id if new_user_id is SAME_USER else new_user_id, new_session_id)
        if src == dst:
            raise SessionExistsError(f"fork: the new session {dst!r} is the source itself")
        return transfer.fork(self._db, t, src, dst)

    def export(self, user_id: Any = ALL_USERS, sessions: Optional[Sequence[str]] = None) -> transfer.ExportLines:
        """One JSON line per row (the columns, timestamps included), streamed a chunk at a time
        from ONE consistent snapshot (one connection, as ``mysqldump --single-transaction``);
        ``sessions`` are session ids of ``user_id`` (which they need: None for the anonymous
        user); catalog and history rows come with their sessions. Keys damaged in the table go
        out as they are, and once the last line is read the iterator's ``damaged`` names them
        (``(session id, key, why)``) and a :class:`DamagedExportWarning` is given.

        >>> store.save("gina", "export-1", "plan", {"step": 1})
        >>> lines = list(store.export("gina", ["export-1"]))
        >>> import json
        >>> [(row["session_id"], row["state_key"]) for row in map(json.loads, lines)]  # the row, its catalog row
        [('gina:export-1', 'plan'), ('__catalog__', 'gina:export-1')]
        >>> stream = store.export("gina", ["export-1"])
        >>> len(list(stream)), stream.damaged  # nothing damaged: it restores whole
        (2, [])
        """
        return transfer.export(self._db, self.table, user_id, args.export_sessions(self.table, user_id, sessions))

    def import_rows(self, lines: Any, *, on_conflict: str = "skip",
                    progress: Optional[Callable[[int], None]] = None) -> int:
        """Write an :meth:`export`'s rows back as they were, in batches under
        ``max_allowed_packet``, all in ONE transaction (a bad line imports nothing);
        ``on_conflict`` "skip" keeps a key that exists whole, "replace" replaces every row of
        each key imported; the rows inserted or changed (twice: 0); the catalog made right.

        >>> store.save("gina", "import-1", "plan", {"step": 1})
        >>> backup = list(store.export("gina", ["import-1"]))
        >>> with MysqlAgentStateStore.from_url(url, table_name="restored", create_if_not_exist=True) as restored:
        ...     restored.import_rows(backup), restored.get("gina", "import-1", "plan")
        ...     restored.import_rows(backup)  # again: nothing to do
        (2, {'step': 1})
        0
        """
        if isinstance(lines, (str, bytes)):  # iterating it would give characters, not lines
            raise TypeError(f"lines must be an iterable of export lines (a list, a file), got one "
                            f"{type(lines).__name__}: give text.splitlines() or [line]")
        if not isinstance(lines, collections.abc.Iterable):
            raise TypeError(f"lines must be an iterable of export lines (a list, a file), got "
                            f"{type(lines).__name__} {serde.cut_repr(lines)}")
        args.callback(progress, "progress")
        n = transfer.import_rows(self._db, self.table, lines, on_conflict, progress)
        self._forget()
        return n

    def prune(self, older_than: Any, *, user_id: Any = ALL_USERS, dry_run: bool = False, batch: int = 500,
              progress: Optional[Callable[[int, int], None]] = None) -> PruneReport:
        """Delete whole sessions with no write since ``older_than`` (a timedelta before the
        server's now, or a datetime), with their history, ``batch`` sessions per transaction;
        ``dry_run`` deletes nothing; ``progress(done, total)`` per batch. A blank ``user_id`` is
        refused (None names the anonymous user), as :meth:`forget_user` refuses it.

        >>> import datetime
        >>> store.save("henry", "prune-1", "plan", 1)
        >>> store.prune(datetime.timedelta(days=30), user_id="henry")  # idle for 30 days: none yet
        PruneReport(sessions=0, rows=0)
        """
        check_count("batch", batch)
        args.flag(dry_run, "dry_run")
        args.callback(progress, "progress")
        if user_id is not ALL_USERS:
            args.erasing_user(user_id, "prune", "nothing was pruned")
        when = retention.cutoff(self._db.run, older_than)
        report = retention.prune(self._db, self.table, user_id, when, dry_run, batch, progress)
        if not dry_run and report.sessions:
            self._forget()
        return report

    def migrate(self, dry_run: bool = False, *,
                progress: Optional[Callable[[int, Optional[int]], None]] = None) -> list[MigrationStep]:
        """Apply the schema steps this table still needs (idempotent, recorded) and return them
        (``name``, ``sql``; ``[]``: nothing to do); ``dry_run`` only lists them. A
        :class:`MigrationError` (the dry run's too), nothing changed, where making the key
        columns exact would split ids spelt in more than one way (case, accents, trailing spaces).
        ``progress(done, None)`` per batch of the version back-fill and the catalog build: the
        rows migrated so far (no total; none called when there is nothing to apply).

        >>> with MysqlAgentStateStore.from_url(url, table_name="migrate_demo", create_if_not_exist=True) as fresh:
        ...     fresh.migrate(progress=lambda done, total: print(done))  # a table made by this version needs nothing
        []
        """
        args.flag(dry_run, "dry_run")
        args.callback(progress, "progress")
        try:
            steps = migrations.migrate(migrations.Ctx(self._db, self.table), dry_run, progress)
        except BaseException:
            if not dry_run:  # a callback that raised too: a step applied before it (exact keys) is learnt
                with contextlib.suppress(Exception):
                    self._refresh_schema("migrate")
            raise
        if steps and not dry_run:
            self._refresh_schema("migrate")
        return steps

    def doctor(self, fix: bool = False, *,
               progress: Optional[Callable[[int, Optional[int]], None]] = None) -> list[DoctorFinding]:
        """Check the table (schema, lists against their hash rows, JSON, the catalog): the
        :class:`DoctorFinding` s (empty: healthy); ``fix=True`` repairs what is safe and marks it ``fixed``.
        ``progress(done, None)`` per chunk of the scan: the sessions checked so far (no total).

        >>> store.doctor()
        []
        """
        args.flag(fix, "fix")
        args.callback(progress, "progress")
        problems = migrations.doctor(migrations.Ctx(self._db, self.table, self._forget), fix, progress)
        if fix:
            self._forget()
            self._refresh_schema("doctor")
        return problems

    def _refresh_schema(self, what: str) -> None:
        """Learn again whether the key columns are exact (a migration may have made them so)."""
        t = self.table
        t.set_exact(self._db.run(lambda cur: schema.key_collation_exact(cur, t.database, t.name), what, write=False))

    # ---- what the store is, and its lifecycle --------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Counters since the store opened: saves by kind, rows and bytes, reads, writes,
        retries by error number, errors by class, stale versions, pool wait, latencies.

        >>> store.save("alice", "metrics-1", "plan", 1)
        >>> store.metrics()["saves"]["value"] >= 1
        True
        """
        return self._metrics.snapshot(self._db.stats)

    @property
    def stats(self) -> Stats:
        """Retries and reconnects so far (for tests, benchmarks and monitoring).

        >>> store.stats.reconnects
        0
        """
        return self._db.stats

    @property
    def pool_timeout(self) -> float:
        """The longest wait for a free connection, seconds (then ``PoolTimeoutError``): the
        connector's, as given to the constructor.

        >>> store.pool_timeout
        10.0
        """
        return self._db.pool_timeout

    @property
    def exact_keys(self) -> bool:
        """Whether the table's key columns compare exactly (case and trailing spaces).

        >>> store.exact_keys
        True
        """
        return self.table.exact_keys

    @property
    def max_allowed_packet(self) -> int:
        """The server's ``max_allowed_packet``: no statement of the store is larger.

        >>> store.max_allowed_packet > 1024
        True
        """
        return self.table.max_allowed_packet

    @property
    def keep_history(self) -> bool:
        """Whether list saves archive what they drop (see :meth:`get_history`).

        >>> store.keep_history
        False
        """
        return self.table.keep_history

    @property
    def encryption(self) -> Optional[Keyring]:
        """The keyring rows are encrypted with (None: rows are plain JSON).

        >>> store.encryption is None
        True
        """
        return self.table.sealer.keyring

    def close(self) -> None:
        """Close the pools this store created (a pool that was given is left open).

        >>> s = MysqlAgentStateStore.from_url(url)
        >>> s.close()
        """
        self._db.close()
        self._forget()

    def __enter__(self) -> "MysqlAgentStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
