"""The store's calls once their arguments are checked: one engine call through the connector,
and what this process remembers of lists kept right around it.

:class:`~mysql_state.store.MysqlAgentStateStore` checks and encodes a call's arguments
(:mod:`mysql_state.args`), then makes ONE call here. Each method runs its engine function
(:mod:`~mysql_state.values`, :mod:`~mysql_state.list_write`, :mod:`~mysql_state.list_read`,
:mod:`~mysql_state.sessions`) as one transaction of the connector, with what the process
remembers (:class:`~mysql_state.memory.ListMemory`: snapshots, hash hints, seen values, damaged
lists, catalog touches) given in before and kept after, and counts it
(:class:`~mysql_state.metrics.Metrics`). Every input is checked already: ids are packed
(``sid``) and validated (``k``), values encoded.

Why a room of its own: the facade reads as the API (a check, one call), and the upkeep each
call needs (what a save teaches the next, what a stale compare-and-set must forget) is in one
place, beside the memory it keeps.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

from . import list_read, list_write, sessions
from . import values as value_engine
from .errors import StaleStateError
from .list_write import ListWrite
from .listsync import ListHash, Plan
from .memory import ListMemory
from .metrics import Metrics
from .pool import Connector
from .results import UNVERSIONED, SavedMany
from .table import Table
from .transaction import Transaction, running

__all__ = ["Calls"]

T = TypeVar("T")


class Calls:
    """The calls of one store over its connector ``db`` and table context ``table``, keeping
    its ``memory`` and ``metrics`` (see the module doc)."""

    def __init__(self, db: Connector, table: Table, memory: ListMemory, metrics: Metrics) -> None:
        self.db, self.table, self.memory, self.metrics = db, table, memory, metrics

    # ---- values ------------------------------------------------------------------------------

    def save_value(self, sid: str, k: str, text: str, size: int, want: int) -> int:
        """Write the encoded value ``text`` if the key's version is ``want``
        (``UNVERSIONED``: whatever it is): the new version, or ``UNVERSIONED``."""
        t = self.table
        version = self.db.run(lambda cur: value_engine.compare_and_set(cur, t, sid, k, text, want, commit=True),
                              f"save {k!r}" if want == UNVERSIONED else f"save_if_version {k!r}",
                              write=True, session=sid)
        if version == UNVERSIONED:
            self.metrics.stale()
        else:
            self._value_saved(sid, k, version, text, size)
        return version

    def _value_saved(self, sid: str, k: str, version: int, text: str, size: int) -> None:
        """Keep what a value save wrote (its version and digest: the next save's guess; nothing
        of a list under the key any more), and count it."""
        self.memory.replaced(sid, k)
        self.memory.value((sid, k), (version, value_engine.digest(text)))
        self.metrics.saved("value", 1, size)

    def read_value(self, sid: str, k: str, model: Any, consistency: str) -> Optional[value_engine.ValueRead]:
        """Row 0 of ``k`` decoded (None: absent); a strong read teaches the writes that follow
        what it saw of a list there (its hash row), or that no list is there now."""
        t = self.table
        found = self.db.run(lambda cur: value_engine.get(cur, t, sid, k, model), f"get {k!r}", write=False,
                            consistency=consistency, session=sid)  # decoded inside: its errors are counted
        if consistency == "strong":  # a list's hash row as seen, or no list there now
            listed = found if found is not None and found.is_list else None
            stored = t.sealer.usable(ListHash.parse(listed.hash_text), sid, k)[0] if listed is not None else None
            self.memory.after_read((sid, k), stored, listed.version if listed is not None else None, consistency,
                                   exact=True)
        return found

    def prefix_values(self, sid: str, prefix: str, consistency: str) -> list:
        """The values of ``sid`` whose key starts with ``prefix``: ``[(key, value, version)]``."""
        t = self.table
        return self.db.run(lambda cur: value_engine.prefix_values(cur, t, sid, prefix), "get_prefix", write=False,
                           consistency=consistency, session=sid)  # decoded inside: its errors are counted

    def key_kind(self, sid: str, k: str, consistency: str) -> Optional[str]:
        """``"list"``, ``"value"`` or None (see the store's ``key_kind``)."""
        t = self.table
        return self.db.run(lambda cur: value_engine.kind(cur, t, sid, k, lock=False), f"key_kind {k!r}",
                           write=False, consistency=consistency, session=sid)

    # ---- list writes -------------------------------------------------------------------------

    def new_list_write(self, sid: str, k: str, items: list, blob: bytes, expected: Optional[int] = None) -> ListWrite:
        """A list save of checked, encoded ``items`` (``blob`` their JSON array), with this
        process's snapshot, hint and damage mark of the list."""
        m, ck = self.memory, (sid, k)
        return ListWrite(sid, k, items, blob, m.snapshots.get(ck), expected=expected, damaged=ck in m.damaged,
                         hint=m.hints.get(ck), hint_version=m.hint_versions.get(ck),
                         missed=m.missed.get(ck) is not None)

    def save_list(self, w: ListWrite) -> Plan:
        """Apply the list save ``w`` (a compare-and-set when ``w.expected`` is set; its
        ``StaleStateError`` forgets what is known of the list); what it wrote."""
        t, m = self.table, self.memory
        what = f"save_list {w.key!r}" if w.expected is None else f"save_list_if_version {w.key!r}"
        began, w.touch, w.commit = time.monotonic(), m.catalog_due(w.sid), True
        try:
            with w.lock():
                plan = self.db.run(lambda cur: list_write.save(cur, t, w), what, write=True, session=w.sid)
        except StaleStateError:
            m.forget((w.sid, w.key))
            raise
        if w.touch and plan.new_hash is not None:  # written, so its catalog row moved
            m.catalog_touched(w.sid, began)
        self._saved(w, plan)
        return plan

    def _saved(self, w: ListWrite, plan: Plan) -> None:
        """Keep what a list save wrote (its snapshot, its hash row as a hint, whether its
        one-statement write missed), and count it."""
        self.memory.saved((w.sid, w.key), w.new_snapshot, w.missed, plan.kind, w.version if w.version > 0 else None)
        self.metrics.saved(*list_write.counted(plan))

    def save_many(self, sid: str, writes: Sequence[ListWrite], prepared: Sequence[tuple],
                  expected: dict, what: str) -> SavedMany:
        """The list saves ``writes`` and the encoded values ``prepared`` (``(sid, key, text,
        size)``) of one session in ONE transaction, ``expected`` the versions they compare with."""
        t, m = self.table, self.memory
        began, due = time.monotonic(), m.catalog_due(sid)
        for w in writes:
            w.touch = due
        with contextlib.ExitStack() as stack:
            for w in writes:
                stack.enter_context(w.lock())
            values_seen = {k: v for _, k, _, _ in prepared if (v := m.values.get((sid, k))) is not None}
            try:
                plans, versions = self.db.run(
                    lambda cur: list_write.save_many(cur, t, writes, prepared, expected, values_seen, due),
                    what, write=True, session=sid)
            except StaleStateError:
                for w in writes:
                    m.forget((w.sid, w.key))
                raise
        if due and (prepared or any(p.new_hash is not None for p in plans.values())):  # written: moved
            m.catalog_touched(sid, began)
        result = SavedMany({w.key: list_write.report(plans[w.key], w.version) for w in writes})
        result.versions = versions
        for w in writes:
            self._saved(w, plans[w.key])
        for _, k, text, size in prepared:
            self._value_saved(sid, k, versions[k], text, size)
        return result

    def append_list(self, sid: str, k: str, datas: Sequence[bytes]) -> int:
        """Append the encoded items ``datas`` (at least one): the new length. ONE statement
        when this process knows the list's hash row (it wrote or read it last)."""
        t, m, cache_key = self.table, self.memory, (sid, k)
        snap = m.snapshots.get(cache_key)
        hint = snap.hash if snap is not None else m.hints.get(cache_key)
        began, due = time.monotonic(), m.catalog_due(sid)
        with list_write.lock_of(snap):
            stored, new_hash = self.db.run(lambda cur: list_write.append(cur, t, sid, k, datas, hint, due, commit=True),
                                           f"append_list {k!r}", write=True, session=sid)
            m.appended(cache_key, snap, stored, datas, new_hash)
        if due:
            m.catalog_touched(sid, began)
        self.metrics.saved("append", len(datas), sum(map(len, datas)))
        return new_hash.n

    def append_lists(self, sid: str, todo: list, want: dict, value_rows: list) -> dict[str, int]:
        """Appends ``todo`` (``[(key, encoded items)]``; a key with no items and no length in
        ``want``, the ``at`` compare-and-set, only has its length read) and values
        ``value_rows`` in ONE transaction; the new length per list key."""
        t, m = self.table, self.memory
        empty, todo = list_write.split_appends(todo, want)

        def lengths_of(cur: Any) -> dict[str, int]:  # the keys given no items, and no ``at``
            return {k: list_read.length(cur, t, sid, k, operation="append_lists") for k in empty}

        if not todo and not value_rows:  # lengths only: one read
            return self.db.run(lengths_of, "append_lists", write=False, session=sid)
        snaps = {k: m.snapshots.get((sid, k)) for k, _ in todo}
        hints = {k: snap.hash if snap is not None else m.hints.get((sid, k)) for k, snap in snaps.items()}
        began, due = time.monotonic(), m.catalog_due(sid)
        with contextlib.ExitStack() as stack:
            for k in sorted(snaps):  # in key order: two calls never wait on each other
                stack.enter_context(list_write.lock_of(snaps[k]))
            try:
                hashes_seen = {k: m.hints.get((sid, k)) for k in want}  # the latest each was read or written

                def run(cur: Any) -> tuple[dict[str, int], dict]:
                    return lengths_of(cur), list_write.append_lists(cur, t, sid, todo, want, value_rows, hints, due,
                                                            hashes_seen)

                lengths, done = self.db.run(run, f"append_lists {[k for k, _ in todo] + [k for k, _ in value_rows]}",
                                            write=True, session=sid)
            except StaleStateError as stale:  # rolled back: only what is known of that list is wrong
                for k, _ in todo:
                    if k == stale.key or stale.key not in snaps:
                        m.forget((sid, k))
                raise
            for k, datas in todo:
                a = done[k]
                if a.new is not None:
                    m.appended((sid, k), snaps[k], a.stored, datas, a.new)
        for k, _ in value_rows:
            m.forget((sid, k))
        if due:  # moved it (the one-trip way skips it when not due; the locked way moves it always)
            m.catalog_touched(sid, began)
        for counted in list_write.appends_counted(todo, value_rows):
            self.metrics.saved(*counted)
        return {**{k: done[k].n for k, _ in todo}, **lengths}

    def pop_list(self, sid: str, k: str, model: Any) -> Any:
        """Remove and return the last item (None when empty)."""
        t = self.table
        value = self.db.run(lambda cur: list_write.pop(cur, t, sid, k, model), f"pop_list {k!r}", write=True,
                            session=sid)  # decoded in the transaction: an item that does not decode is not popped
        self.memory.forget((sid, k))
        return value

    # ---- list reads --------------------------------------------------------------------------

    def get_list(self, sid: str, k: str, model: Any, offset: int, limit: Optional[int],
                 consistency: str) -> tuple[list, int]:
        """The list's items (a window, a tail) and its version, checked against its hash row;
        the read shaped by what this process last saw of the list, and teaching what follows."""
        t, m = self.table, self.memory
        with m.noting_damage():  # decoded inside: its errors are counted
            hint = m.hints.get((sid, k))  # the length last seen picks the read's shape
            n = hint.n if hint is not None else None
            known, learned = m.reading((sid, k))  # a whole read: only what is new
            items, version, stored = self.db.run(
                lambda cur: list_read.get(cur, t, sid, k, offset, limit, model, n, known, learned),
                f"get_list {k!r}", write=False, consistency=consistency, session=sid)
        m.read_kept((sid, k), learned)
        m.after_read((sid, k), stored, version, consistency, whole=offset == 0 and limit is None)
        return items, version

    def get_many(self, sid: str, value_keys: Sequence[str], list_keys: Sequence[str],
                 consistency: str) -> dict[str, tuple[Any, int]]:
        """Values and whole lists of one session in ONE statement: ``{key: (value, version)}``."""
        t, m = self.table, self.memory
        found_heads: dict[str, Any] = {}  # filled by the read: per key what it saw (list_read.check_many)
        first = (sid, list_keys[0]) if list_keys else None
        known, learned = m.reading(first) if first else (None, None)  # the first list: only what is new
        with m.noting_damage():  # decoded inside: its errors are counted
            found = self.db.run(lambda cur: list_read.many(cur, t, sid, value_keys, list_keys, found_heads, known,
                                                              learned),
                                "get_many", write=False, consistency=consistency, session=sid)
        if first:
            m.read_kept(first, learned)
        for k in list_keys:  # what the read saw guides the writes that follow
            version = found[k][1] if k in found and consistency != "strong" else None
            m.after_read((sid, k), found_heads.get(k), version, consistency, whole=True)
        if consistency == "strong":
            for k in value_keys:
                m.value((sid, k), found_heads.get(k))
        return found

    def length(self, sid: str, k: str, operation: Optional[str], consistency: str = "strong") -> int:
        """:func:`list_read.length` in one read (``operation``: an append of no items, which
        refuses a value under the key)."""
        t = self.table
        return self.db.run(lambda cur: list_read.length(cur, t, sid, k, operation=operation),
                           f"{operation or 'list_length'} {k!r}", write=False, consistency=consistency, session=sid)

    # ---- transactions, deletes ---------------------------------------------------------------

    def transaction(self, fn: Callable[[Transaction], T]) -> T:
        """``fn(tx)`` in ONE transaction (run again on a deadlock); afterwards the memory of
        every list it touched is dropped, or kept where it only appended."""
        m = self.memory
        touched: set = set()
        appended: set = set()
        repaired: set = set()
        hashes: dict = {}
        saves: list = []

        def tx(cur: Any) -> T:
            t = Transaction(self.table, cur, m.damaged, m.hints.get)
            repaired.clear()  # a run again: only the run that commits repairs
            hashes.clear()
            saves.clear()  # and only its saves are counted
            try:
                with running(self.db):
                    return fn(t)
            finally:
                appended.difference_update(t.touched)  # a run again: its last run's say
                touched.update(t.touched)
                appended.update(t.appended)
                repaired.update(t.repaired)
                hashes.update(t.hashes)
                saves[:] = t.saves

        try:
            result = self.db.run(tx, "transaction", write=True, session=None)  # any sessions
        finally:
            m.forget_all_of(touched, appended)
        for sid, k in repaired:  # committed: written whole
            m.replaced(sid, k)
        for key, written in hashes.items():  # committed: the hash rows its appends left
            if key in appended:
                m.hint(key, written)
        for counted in saves:  # committed: its saves count as the store's own calls' do
            self.metrics.saved(*counted)
        return result

    def exists(self, sid: str, consistency: str) -> bool:
        """Whether the session has any row."""
        t = self.table
        return self.db.run(lambda cur: sessions.exists(cur, t, sid), "exists", write=False,
                           consistency=consistency, session=sid)

    def session_ids(self, prefix: str, consistency: str) -> set[str]:
        """The session ids of the user whose packed ids start with ``prefix``."""
        t = self.table
        return self.db.run(lambda cur: sessions.session_ids(cur, t, prefix), "list_session_ids", write=False,
                           consistency=consistency)

    def truncate(self) -> int:
        """Remove every row; the callers' rows there were. Everything remembered is dropped."""
        t = self.table
        count = self.db.run(lambda cur: sessions.truncate(cur, t), "truncate_all_sessions", write=True, session=None)
        self.memory.forget()
        return count

    def delete(self, sid: str, k: Optional[str]) -> None:
        """Delete the session ``sid`` whole (``k`` None) or its key ``k``."""
        t = self.table
        if k is None:
            self.db.run(lambda cur: sessions.delete_session(cur, t, sid), "delete", write=True, session=sid)
        else:
            self.db.run(lambda cur: sessions.delete_key(cur, t, sid, k), f"delete {k!r}", write=True, session=sid)
        self.memory.replaced(sid, k)  # forgotten, damage mark included

    def delete_keys(self, sid: str, ks: Sequence[str], maintenance: bool) -> int:
        """Delete the keys ``ks`` of ``sid`` in ONE transaction; the rows removed."""
        t = self.table
        removed = self.db.run(lambda cur: sessions.delete_keys(cur, t, sid, ks, touch=not maintenance),
                              f"delete_keys {ks[:3]!r}{'...' if len(ks) > 3 else ''}", write=True, session=sid)
        for k in ks:
            self.memory.replaced(sid, k)  # forgotten, damage mark included
        return removed
