"""``store.transaction(fn)``: several reads and writes, across sessions, in one transaction.

``fn(tx)`` gets a :class:`Transaction` whose methods take the store's arguments (no
``consistency``: a transaction reads the primary; the writes take ``maintenance=True`` too, for
a sweep or a repair that must not look like activity). Reads lock
what they read (a list's hash row, a value's row), so a read-modify-write never loses a
concurrent update; a key read as absent is created by a plain INSERT, so a writer that created
it meanwhile makes this transaction fail with a duplicate key and run again. The whole of
``fn`` is re-run on a deadlock, a lock wait timeout, a duplicate key of a lost creation race or
a cluster certification conflict, so ``fn`` must have no effect outside ``tx``.

The arguments are checked as the store checks them (:mod:`mysql_state.args`) and the writes are
the engines' own (:mod:`mysql_state.values`, :mod:`mysql_state.list_write`,
:mod:`mysql_state.sessions`), given the table context: a write inside a transaction is exactly
the write outside one.

Inside ``fn``, the store itself is for reads only. A write through the store (``store.save``,
``store.delete``, ..., or a nested ``store.transaction``) on the same thread would run on
another connection and wait for the row locks this transaction holds (a deadlock until the
lock wait times out), or commit outside it: it is refused at once with
:class:`NestedTransactionError`, before any SQL (the connector's ``guard`` runs
:func:`guard`). A read through the store (``store.get``, ``store.exists``, ...) is allowed: it
sees committed state only, not this transaction's writes, and locks nothing; read with
``tx.get`` / ``tx.get_list`` / ``tx.list_length`` what ``fn`` decides on.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from . import args, list_read, list_write, locks, serde, sessions, values
from .errors import CorruptStateError, NestedTransactionError
from .table import Table

__all__ = ["Transaction", "running", "refuse_nested", "guard"]

#: The connectors whose ``transaction(fn)`` is running its ``fn`` in this thread (or task).
_RUNNING: contextvars.ContextVar[tuple] = contextvars.ContextVar("mysql_state_transaction", default=())


@contextlib.contextmanager
def running(connector: Any) -> Iterator[None]:
    """Mark ``fn`` of a transaction on ``connector`` as running in this context."""
    token = _RUNNING.set(_RUNNING.get() + (connector,))
    try:
        yield
    finally:
        _RUNNING.reset(token)


def refuse_nested(connector: Any, what: str) -> None:
    """Raise :class:`NestedTransactionError` when a write on ``connector`` is asked for from
    inside the ``fn`` of a transaction on the same connector in this context."""
    if any(c is connector for c in _RUNNING.get()):
        raise NestedTransactionError(
            f"{what}: a write through the store inside store.transaction(fn) would wait for the "
            "transaction's own locks; nothing was written. Inside fn, write with tx.save, "
            "tx.save_list, tx.append_list and tx.delete, read with tx.get, tx.get_list and "
            "tx.list_length; for a nested transaction, call the inner function with the same tx"
        )


def guard(connector: Any, what: str, write: bool) -> None:
    """The store's ``Connector.guard``: before each call on ``connector``, refuse a write from
    inside its own transaction's ``fn`` (:func:`refuse_nested`), and raise
    :class:`~mysql_state.errors.LockLostError` inside a lease of it that was lost
    (:func:`mysql_state.locks.check_leases`)."""
    if write:
        refuse_nested(connector, what)
    locks.check_leases(connector)


class Transaction:
    """The ``tx`` of :meth:`MysqlAgentStateStore.transaction`; valid only inside ``fn``.

    >>> def bump(tx):  # a read-modify-write: the row stays locked until the commit
    ...     n = tx.get("alice", "counter-1", "n", default=0) + 1
    ...     tx.save("alice", "counter-1", "n", n)
    ...     return n
    >>> store.transaction(bump), store.transaction(bump)
    (1, 2)
    """

    def __init__(self, table: Table, cur: Any, damaged: Optional[set] = None,
                 seen: Optional[Callable[[tuple[str, str]], Any]] = None) -> None:
        self._table = table
        self._cur = cur
        #: The hash row the store last read or wrote of a list, by ``(sid, key)`` (None: none).
        self._seen = seen
        #: The store's lists found damaged (shared): a read here adds to it, a save rewrites them.
        self._damaged: set[tuple[str, str]] = set() if damaged is None else damaged
        self._absent: set[tuple[str, str]] = set()  # keys read as absent: create, never upsert
        #: (packed session id, key) pairs written; the store forgets their snapshots at the end.
        self.touched: set[tuple[str, Optional[str]]] = set()
        #: Of those, the list keys whose last write here was an append: what the store's last
        #: whole read of them kept stays the base of its next read (proven there on use).
        self.appended: set[tuple[str, Optional[str]]] = set()
        #: Keys written whole here (a value, a whole list, a delete: ``(sid, None)`` a session):
        #: once committed, a damage a read found in them is gone.
        self.repaired: set[tuple[str, Optional[str]]] = set()
        #: Lists read here (under their lock): ``at`` is checked against what the caller read.
        self.read: set[tuple[str, str]] = set()
        #: The hash rows of the lists last appended to here, as written (read under their lock):
        #: once committed, what the store knows of them (``at`` is checked against it).
        self.hashes: dict[tuple[str, str], Any] = {}
        #: The saves made here, ``(kind, rows, plaintext bytes)`` as the store's metrics count
        #: them: counted once the transaction commits (a maintenance write is not a save).
        self.saves: list[tuple[str, int, int]] = []

    # ---- reads (locking) ---------------------------------------------------------------------

    def get(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None,
            default: Any = None) -> Any:
        """The value at ``key``, its row locked until the transaction ends.

        >>> store.save("alice", "tx-get-1", "plan", {"step": 1})
        >>> store.transaction(lambda tx: tx.get("alice", "tx-get-1", "plan"))
        {'step': 1}
        >>> store.transaction(lambda tx: tx.get("alice", "tx-get-1", "missing", default=0))
        0
        """
        t, model = self._table, serde.check_type(type)
        sid, k = args.key_ids(t, user_id, session_id, key)
        found = values.value_of(t, sid, k, values.read_for_update(self._cur, t, sid, k), model)
        if found is None:
            self._absent.add((sid, k))
            return default
        return default if found.empty else found.value

    def get_list(self, user_id: Optional[str], session_id: str, key: str, type: Optional[type] = None, *,
                 offset: int = 0, limit: Optional[int] = None) -> list:
        """The list's items (a window as in the store); its hash row locked until the end.

        >>> store.save_list("alice", "tx-list-1", "memory", ["a", "b", "c"])
        >>> store.transaction(lambda tx: tx.get_list("alice", "tx-list-1", "memory", offset=-2))
        ['b', 'c']
        """
        t, model = self._table, serde.check_type(type)
        sid, k = args.key_ids(t, user_id, session_id, key, is_list=True)
        offset, limit = args.window(offset, limit)
        list_read.read_hash(self._cur, t, sid, k, lock=True)
        self.read.add((sid, k))
        try:
            return list_read.get(self._cur, t, sid, k, offset, limit, model)[0]
        except CorruptStateError:
            self._damaged.add((sid, k))
            self._wrote(sid, k)  # the store forgets what it remembers of the list
            raise

    def list_length(self, user_id: Optional[str], session_id: str, key: str) -> int:
        """Number of items; the hash row locked until the end.

        >>> store.save_list("alice", "tx-length-1", "memory", ["a", "b"])
        >>> store.transaction(lambda tx: tx.list_length("alice", "tx-length-1", "memory"))
        2
        """
        sid, k = args.key_ids(self._table, user_id, session_id, key, is_list=True)
        self.read.add((sid, k))
        return list_read.length(self._cur, self._table, sid, k, lock=True)

    # ---- writes ------------------------------------------------------------------------------

    def save(self, user_id: Optional[str], session_id: str, key: str, value: Any, *,
             maintenance: bool = False) -> None:
        """Store one value (a list under the key is removed), as :meth:`MysqlAgentStateStore.save`;
        ``maintenance=True``: the session's activity (catalog row) is left as it was, the row
        written gets its new version (see :func:`mysql_state.sessions.activity_pinned`).

        >>> store.transaction(lambda tx: tx.save("alice", "tx-save-1", "plan", {"step": 2}))
        >>> store.get("alice", "tx-save-1", "plan")
        {'step': 2}
        """
        t = self._table
        args.flag(maintenance, "maintenance")
        sid, k, text, size = args.prepare_value(t, user_id, session_id, key, value)
        with self._kept(sid, maintenance, k):
            if (sid, k) in self._absent:
                # Read as absent: a plain INSERT, so that if another writer created the key since,
                # its duplicate key (1062) makes the store run fn again on what that writer wrote.
                values.insert_new(self._cur, t, sid, k, text)
                self._absent.discard((sid, k))
            else:
                values.write(self._cur, t, sid, k, text)
        self._wrote(sid, k)
        self.repaired.add((sid, k))
        if not maintenance:
            self.saves.append(("value", 1, size))

    def save_list(self, user_id: Optional[str], session_id: str, key: str, values: Sequence[Any], *,
                  maintenance: bool = False) -> None:
        """Store the whole list, writing only what changed, as :meth:`MysqlAgentStateStore.save_list`;
        ``maintenance=True`` as for :meth:`save`.

        >>> def move(tx):  # two lists changed together, or neither
        ...     todo = tx.get_list("alice", "tx-save-list-1", "todo")
        ...     tx.save_list("alice", "tx-save-list-1", "todo", todo[1:])
        ...     tx.append_list("alice", "tx-save-list-1", "done", todo[:1])
        >>> store.save_list("alice", "tx-save-list-1", "todo", ["write", "test"])
        >>> store.transaction(move)
        >>> store.get_many("alice", "tx-save-list-1", lists=["todo", "done"])
        {'todo': ['test'], 'done': ['write']}
        """
        t = self._table
        args.flag(maintenance, "maintenance")
        sid, k, items, blob = args.prepare_list(t, user_id, session_id, key, values)
        # no snapshot: plan from the table, which this transaction may have changed already
        w = list_write.ListWrite(sid, k, items, blob, None, damaged=(sid, k) in self._damaged)
        with self._kept(sid, maintenance, k):
            plan = list_write.save(self._cur, t, w)
        self._wrote(sid, k)
        self.repaired.add((sid, k))  # written whole (a damaged list rewritten): once committed
        if not maintenance:
            self.saves.append(list_write.counted(plan))

    def _wrote(self, sid: str, k: Optional[str], *, appended: bool = False) -> None:
        """``k`` of ``sid`` (None: the whole session) was written: ``appended``, its items only
        added to (what the store's last whole read kept stays a base), else otherwise."""
        self.touched.add((sid, k))
        if appended:
            self.appended.add((sid, k))
        elif k is None:  # the whole session
            self.appended -= {x for x in self.appended if x[0] == sid}
            self.hashes = {x: h for x, h in self.hashes.items() if x[0] != sid}
        else:
            self.appended.discard((sid, k))
            self.hashes.pop((sid, k), None)  # type: ignore[arg-type]

    def _kept(self, sid: str, maintenance: bool, key: str) -> Any:
        """The session's activity pinned around a maintenance write of ``key`` (else nothing)."""
        return sessions.activity_pinned(self._cur, self._table, sid, key) if maintenance else contextlib.nullcontext()

    def append_list(self, user_id: Optional[str], session_id: str, key: str, items: Sequence[Any]) -> int:
        """Add items after the end; returns the new length.

        >>> store.save_list("alice", "tx-append-1", "memory", ["a"])
        >>> store.transaction(lambda tx: tx.append_list("alice", "tx-append-1", "memory", ["b", "c"]))
        3
        """
        sid, k, datas = args.prepare_append(self._table, user_id, session_id, key, items)
        self._wrote(sid, k, appended=True)
        if not datas:
            return list_read.length(self._cur, self._table, sid, k, lock=True, operation="append_list")
        new_hash = list_write.append(self._cur, self._table, sid, k, datas)[1]
        self.hashes[(sid, k)] = new_hash
        self.saves.append(("append", len(datas), sum(map(len, datas))))
        return new_hash.n

    def append_lists(self, user_id: Optional[str], session_id: str, appends: Mapping[str, Sequence[Any]], *,
                     at: Optional[Mapping[str, int]] = None, values: Optional[Mapping[str, Any]] = None
                     ) -> dict[str, int]:
        """Append items to several lists of one session (``{key: items}``), each as
        :meth:`append_list` does, and save ``values`` (``{key: value}``, as :meth:`save`) beside,
        in 2 statements for all of them (the hash rows locked in one, every row written in
        one); returns the new length per list key. ``at`` (``{key: length}``) makes the appends
        a compare-and-set: a list of another length, or of that length but not the one the store
        last read or wrote (another writer rewrote it), raises :class:`StaleStateError` before
        this call writes anything.

        >>> store.save_list("alice", "tx-appends-1", "memory", ["a"])
        >>> store.transaction(lambda tx: tx.append_lists("alice", "tx-appends-1", {"memory": ["b"], "steps": [1]},
        ...                                              at={"memory": 1}, values={"plan": "done"}))
        {'memory': 2, 'steps': 1}
        """
        sid, todo, want, value_rows = args.append_lists(self._table, user_id, session_id, appends, at, values)
        # ``at`` checked against the store's last sight of each list too, unless written here already
        seen = ({k: self._seen((sid, k)) for k in want if (sid, k) not in self.touched and (sid, k) not in self.read}
                if self._seen else None)
        for k, _ in todo:
            self._wrote(sid, k, appended=True)
        for k, _ in value_rows:
            self._wrote(sid, k)
        empty, todo = list_write.split_appends(todo, want)
        lengths = {k: list_read.length(self._cur, self._table, sid, k, lock=True, operation="append_lists")
                   for k in empty}
        absent = [(k, values[k]) for k, _ in value_rows if (sid, k) in self._absent]  # type: ignore[index]
        value_rows = [r for r in value_rows if (sid, r[0]) not in self._absent]
        if todo or value_rows:
            new = list_write.append_many(self._cur, self._table, sid, todo, want, value_rows, seen)
            lengths.update({k: a.n for k, a in new.items()})
            for k, a in new.items():
                if (written := a.new or a.stored) is not None:  # the hash row as this call left it
                    self.hashes[(sid, k)] = written
            self.saves += list_write.appends_counted(todo, value_rows)
        for k, v in absent:  # read as absent: created by a plain INSERT, as save does
            self.save(user_id, session_id, k, v)
        return lengths

    def delete(self, user_id: Optional[str], session_id: str, key: Optional[str] = None, *,
               maintenance: bool = False) -> None:
        """Delete the whole session, or one key; ``maintenance=True``: a key's delete leaves the
        session's activity (catalog row) as it is (see :meth:`delete_keys`).

        >>> store.save("alice", "tx-delete-1", "plan", 1)
        >>> store.transaction(lambda tx: tx.delete("alice", "tx-delete-1"))
        >>> store.exists("alice", "tx-delete-1")
        False
        """
        t = self._table
        args.flag(maintenance, "maintenance")
        sid, k = args.ids(t, user_id, session_id, key)
        if k is None:
            sessions.delete_session(self._cur, t, sid)
        else:
            sessions.delete_key(self._cur, t, sid, k, touch=not maintenance)
        self._wrote(sid, k)
        self.repaired.add((sid, k))

    def delete_keys(self, user_id: Optional[str], session_id: str, keys: Sequence[str], *,
                    maintenance: bool = False) -> int:
        """Delete keys of one session, as :meth:`MysqlAgentStateStore.delete_keys`; the rows removed.

        >>> store.save_many("alice", "tx-delete-keys-1", values={"a": 1, "b": 2}, lists={"memory": ["x"]}).versions
        {'memory': 1, 'a': 1, 'b': 1}
        >>> store.transaction(lambda tx: tx.delete_keys("alice", "tx-delete-keys-1", ["a", "memory"]))
        3
        """
        sid, ks = args.delete_keys(self._table, user_id, session_id, keys, maintenance)
        if not ks:
            return 0
        for k in ks:
            self._wrote(sid, k)
        removed = sessions.delete_keys(self._cur, self._table, sid, ks, touch=not maintenance)
        self.repaired.update((sid, k) for k in ks)
        return removed
