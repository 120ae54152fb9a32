"""The list write engine: plans applied, appends, pops, and ``save_many``'s transaction.

Every list writer locks the list's hash row first (a new list: creates it, and of two
creators the second fails with a duplicate key and is retried), so writers of one list are
serialised and the hash row always describes the rows. What to write is planned by
:mod:`mysql_state.listsync` (pure): from the process's snapshot when it still matches the
stored hash row (warm), else from the stored checkpoint (cold, checked from the hasher state
this process kept when it saw the list), else item by item. A save or append that only adds
items is ONE statement, checked against the hash row this process last read or wrote
(:func:`append_if_hash`): the common turn costs 2 statements with the COMMIT, sent in one packet
where the connection allows, from any worker that read the list first. A list whose last such speculation missed (another worker writes
it) goes the locked way at once: lock and read the hash row, write, COMMIT (3, never 5).
A value of ``save_many`` is written in ONE statement while its row is what this process last
read or wrote (:func:`mysql_state.values.write_if_seen`), else the locked way.

Functions of ``(cursor, table, ...)`` on checked, encoded input; only the items a plan writes
are checked here (:func:`mysql_state.args.check_upserts`), since only planning knows them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import args, catalog, history, keys, list_read, listsync, serde, sql, values
from .errors import CorruptStateError, StaleStateError, WrongTypeError, errno_of
from .listsync import Digester, ListHash, Plan, Snapshot
from .results import UNVERSIONED, SaveReport
from .table import Table

__all__ = ["ListWrite", "save", "apply", "write_rows", "write_list", "append", "append_many", "append_lists", "split_appends",
           "append_if_hash", "pop", "save_many", "report", "lock_of"]


@dataclass
class ListWrite:
    """One list save, checked and encoded, on its way into a transaction."""

    sid: str
    key: str
    values: Sequence[Any]
    blob: bytes
    snapshot: Optional[Snapshot]
    new_snapshot: Optional[Snapshot] = None
    expected: Optional[int] = None  # compare-and-set: the version the caller read (None: any)
    version: int = UNVERSIONED  # the list's version after the write
    damaged: bool = False  # a read found its rows damaged: the hash row cannot vouch for them
    hint: Optional[ListHash] = None  # the hash row this process last read or wrote
    hint_version: Optional[int] = None  # the list's version then, when known
    #: This list's last speculation missed (another worker writes it): go the locked way
    #: (3 statements) rather than try a one-statement write bound to fail (5). Set and
    #: cleared by :func:`save`; the process's memory keeps it per list (``memory.ListMemory``).
    missed: bool = False
    #: Whether the session's catalog row must be moved (``memory.ListMemory.catalog_due``):
    #: False lets a one-statement write, whose condition proves the session, leave it.
    touch: bool = True
    #: Single values riding in this list's one-statement append (``save_many``): ``(key,
    #: stored text, (version, digest) this process last saw)``; ``riders_written`` says they
    #: were written there (else they go their own way).
    riders: Sequence[tuple[str, str, tuple[int, str]]] = ()
    riders_written: bool = False
    #: The save is the whole transaction (``save_list``): a one-statement write carries the
    #: COMMIT (one round trip), and :func:`save` sends nothing after it.
    commit: bool = False

    def lock(self) -> Any:
        return lock_of(self.snapshot)


def split_appends(todo: Sequence[tuple[str, list[bytes]]], at: Mapping[str, int]
                  ) -> tuple[list[str], list[tuple[str, list[bytes]]]]:
    """An ``append_lists``' ``todo`` split: the keys given no items and no ``at`` length (only
    their length is read, as :func:`list_read.length` gives it), and the appends left to write.

    >>> split_appends([("a", []), ("b", [b'1']), ("c", [])], {"c": 0})
    (['a'], [('b', [b'1']), ('c', [])])
    """
    return ([k for k, datas in todo if not datas and k not in at],
            [(k, datas) for k, datas in todo if datas or k in at])


def counted(plan: Plan) -> tuple[str, int, int]:
    """A list save as the store's metrics count it: ``(kind, rows, plaintext bytes)`` of what
    ``plan`` wrote (``unchanged``: none)."""
    return plan.kind, len(plan.upserts), sum(len(d) for _, d in plan.upserts)


def appends_counted(todo: Sequence[tuple[str, Sequence[bytes]]],
                    value_rows: Sequence[tuple[str, bytes]]) -> list[tuple[str, int, int]]:
    """An ``append_lists`` as the store's metrics count it: one ``append`` per list given items
    (``todo``, ``(key, encoded items)``) and one ``value`` per value (``(key, its JSON)``), each
    ``(kind, rows, plaintext bytes)``.

    >>> appends_counted([("memory", [b'"a"', b'"b"']), ("steps", [])], [("plan", b'{}')])
    [('append', 2, 6), ('value', 1, 2)]
    """
    return ([("append", len(datas), sum(map(len, datas))) for _, datas in todo if datas]
            + [("value", 1, len(data)) for _, data in value_rows])


def lock_of(snapshot: Optional[Snapshot]) -> Any:
    """One writer per list key in this process while its snapshot is in use."""
    return snapshot.lock if snapshot is not None else contextlib.nullcontext()


def refuse_a_value(hash_row: Any, items: Sequence[tuple], sid: str, k: str, operation: str) -> None:
    """Refuse a list operation on a key that holds a single value: no hash row (of any
    format) and row 0 alone. (A key is a value or a list, never both: :class:`WrongTypeError`.)"""
    if hash_row is None and len(items) == 1 and items[0][0] == 0:
        raise WrongTypeError(sid, k, operation)


def rows_are_whole(count: Any, lo: Any, hi: Any, stored: Optional[ListHash]) -> bool:
    """Whether a list's item rows are exactly ``0..n-1`` for the ``n`` its hash row says."""
    if stored is None:
        return True  # no hash row of ours: the cold path reads the rows anyway
    if stored.n == 0:
        return int(count) == 0
    return int(count) == stored.n and lo == 0 and hi == stored.n - 1


def report(plan: Plan, version: int) -> SaveReport:
    """The public report of a save (no bytes, no hashes)."""
    return SaveReport(plan.kind, len(plan.upserts), version, tuple(i for i, _ in plan.upserts), plan.delete_from)


# ---- rows ------------------------------------------------------------------------------------


def write_rows(cur: Any, t: Table, sid: str, rows: list[tuple[str, int, bytes]]) -> None:
    """Upsert rows ``(key, index, json)`` of ``sid`` (sealed), the session's catalog row riding last."""
    rows = t.sealer.seal_rows(sid, rows)
    for statement, params in sql.upsert_rows(t.upsert, sid, rows, t.statement_bytes, catalog.row(sid)):
        cur.execute(statement, params)


def write_list(cur: Any, t: Table, sid: str, k: str, items: list[tuple[int, bytes]], new_hash: ListHash,
               with_hash: bool) -> None:
    """Items, and the hash row in the same multi-row upsert when ``with_hash`` (a list
    whose hash row exists; a new list's is created first by :func:`create_hash_row`)."""
    rows = [(k, i, d) for i, d in items]
    if with_hash:
        rows.append((keys.hash_key(k), 0, new_hash.to_json()))
    write_rows(cur, t, sid, rows)


def create_hash_row(cur: Any, t: Table, sid: str, k: str, new_hash: ListHash) -> int:
    """INSERT a new list's hash row, its version one past a value it replaces; that version.

    Of two writers racing to create one list, the second waits on the first's row and
    then fails with 1062 (duplicate key): its whole transaction is retried against the
    created list.
    """
    cur.execute(t.statements["INSERT_HASH_ROW"], (sid, keys.hash_key(k), new_hash.to_json().decode(), sid, k))
    return int(cur.lastrowid or 0)


def rewritten(text: Optional[str], seen: Optional[ListHash]) -> bool:
    """Whether the hash row ``text`` is not the one this process last read or wrote (``seen``;
    None: nothing known, nothing to tell) although the list's version or length is: another
    writer rewrote the list and left those as they were (the Java store's list save, a copy
    over a deleted list). A hash row keyed anew (``reencrypt``: its digests under another
    digest key, its checkpoint moved) is compared by its length only: a rewrite to the same
    length between a key rotation and this call is not seen.

    >>> h = ListHash.parse('{"fmt":"mysql-state/list-v1","n":1,"sum":"01"}')
    >>> rewritten('{"fmt":"mysql-state/list-v1","n":1,"sum":"01"}', h), rewritten("3f2a9c", h)
    (False, True)
    """
    if seen is None:
        return False
    now = ListHash.parse(text)
    if now is None:
        return True
    if now.dk != seen.dk:
        return now.n != seen.n
    return now != seen


def _lock_hash(cur: Any, t: Table, sid: str, k: str) -> tuple[Optional[tuple], Optional[ListHash], Digester]:
    """Lock the hash row: (the row or None, what it says if usable, its digester)."""
    cur.execute(t.statements["LOCK_HASH_ROW"], (sid, keys.hash_key(k)))
    row = cur.fetchone()
    stored, dig = t.sealer.usable(ListHash.parse(row[0] if row else None), sid, k)
    return row, stored, dig


def _locked_items(cur: Any, t: Table, sid: str, k: str) -> list:
    """The item rows ``(item_index, state_data)`` in order, locked."""
    cur.execute(t.statements["LOCK_ITEMS"], (sid, k))
    return cur.fetchall()


def _items_then_hash(cur: Any, t: Table, sid: str, k: str, row: Optional[tuple], stored: Optional[ListHash],
                     dig: Digester) -> tuple[list, Optional[tuple], Optional[ListHash], Digester]:
    """The item rows, locked, of a list whose hash row ``row`` was not this store's (or none);
    and the hash row again when there was none but items are there now: a locking read of a
    missing row locks nothing (READ COMMITTED), so a creator could commit its items and hash
    row in between, and its hash row, not its row 0 seen alone, says the key holds a list."""
    have = _locked_items(cur, t, sid, k)
    if row is None and have:
        row, stored, dig = _lock_hash(cur, t, sid, k)
    return have, row, stored, dig


def _locked_to_change(cur: Any, t: Table, sid: str, k: str, operation: str
                      ) -> tuple[Optional[tuple], Optional[ListHash], Digester, list]:
    """The hash row of a list an append or a pop changes, locked: (the row, what it says if
    it is this store's, its digester, and, when it is not, the item rows, locked). Refused,
    nothing written: a hash row of this store that cannot be read, a key holding a value
    (:func:`refuse_a_value`), and item rows with a gap (:class:`CorruptStateError`, as a read
    raises: numbered anew, the lost row would leave no trace)."""
    row, stored, dig = _lock_hash(cur, t, sid, k)
    if row is not None and stored is None:
        list_read.parse_head(sid, k, row[0])  # a hash row of this store that cannot be read: damage
    have: list = []
    if stored is None:  # no hash row of ours: the items (and the hash row a creator made meanwhile)
        have, row, stored, dig = _items_then_hash(cur, t, sid, k, row, stored, dig)
    if stored is None:
        refuse_a_value(row, have, sid, k, operation)
        if [r[0] for r in have] != list(range(len(have))):
            raise list_read.damaged(sid, k, None, 0, len(have), len(have), have[0][0], have[-1][0])
    return row, stored, dig, have


def _opened(t: Table, sid: str, k: str, rows: Sequence[tuple]) -> list[bytes]:
    """The plaintext JSON of stored rows ``(item_index, state_data)``."""
    return [t.sealer.open(sid, k, r[0], r[1]) for r in rows]


# ---- a whole list saved ----------------------------------------------------------------------


def save(cur: Any, t: Table, w: ListWrite, speculate: bool = True) -> Plan:
    """Lock the hash row, plan (warm snapshot, else the checkpoint, else item by item), write.

    A save that only appends is ONE statement, conditioned on the stored hash row being the
    one it was planned against (:func:`append_if_hash`; 2 statements with the COMMIT, one packet):
    against a hash row this process *read* since it last wrote the list (``w.hint``: an
    AgentScope turn loads before it saves), else against its snapshot's, unless the list's
    last speculation missed (``w.missed``: another worker writes it). Otherwise, and when the
    speculation misses, the locked way: lock and read the hash row, plan, write (3 round trips
    with the COMMIT). Every plan against a row another worker wrote is checked from the hasher
    state this process kept (:func:`listsync.cold_start`'s ``seen``) when it fits.

    ``speculate=False``: the locked way only. A missed speculation rolls back the whole
    transaction, so only a transaction's first write may speculate (``save_many``'s first list).
    """
    encode = lambda vs, start: serde.encode_items(vs, w.key, start, check=False)  # noqa: E731
    snap = w.snapshot
    if w.expected is None and speculate:
        hint, hint_dig = t.sealer.usable(w.hint, w.sid, w.key)
        if hint is not None and not w.damaged and (snap is None or hint != snap.hash):
            plan = _speculate(cur, t, w, listsync.plan_on_hint(w.blob, w.values, hint, encode, hint_dig, snap), hint)
            if plan is not None:
                return plan
            w.missed = True
        if snap is not None and not w.missed:
            planned = snap.diff(w.blob, w.values, encode)
            if planned is not None and planned[0].kind == "append" and planned[0].delete_from is None:
                plan = _speculate_on_prefix(cur, t, w, planned, snap)
                if plan is not None:
                    return plan
                w.missed = True
    row, stored, dig = _lock_hash(cur, t, w.sid, w.key)
    # No hash row: the version a compare-and-set compares with is the key's (values.cas_version).
    before = int(row[1]) if row else (values.cas_version(cur, t, w.sid, w.key) if w.expected is not None else 0)
    if w.expected is not None and w.expected != UNVERSIONED:
        # The version expected, but not the hash row this process last read or wrote: a
        # writer that does not move the version came between (the Java store's list save
        # rewrites the hash row's text only). One retry after a re-read, never a lost turn.
        # A version this process did not see the list at (handed over by another worker): the
        # hint cannot tell whether the list was rewritten at it; the version alone is compared.
        seen_at = w.hint_version is None or w.hint_version == w.expected
        if w.expected != before or (seen_at and rewritten(row[0] if row else None, w.hint)):
            raise StaleStateError(w.key, w.expected, before)
    if w.damaged:
        stored = None  # a read found its rows damaged: the hash row cannot vouch for them
    planned = None
    if snap is not None and stored is not None and stored == snap.hash:
        w.missed = False  # the row is the one this process wrote: speculate again next time
        planned = snap.diff(w.blob, w.values, encode)
    if planned is None and stored is not None:
        planned = _plan_from_checkpoint(cur, t, w, stored, encode, dig)
    if planned is None:
        planned = _plan_per_item(cur, t, w.sid, w.key, w.values, w.blob, stored, dig)
    plan, w.new_snapshot = planned
    if plan.kind == "unchanged" and stored is not None:
        # Nothing to write by the hash row: check the rows still are what it describes
        # (a row deleted by hand would otherwise never be repaired).
        cur.execute(t.statements["ITEMS_SHAPE"], (w.sid, w.key))
        count, lo, hi = cur.fetchone()
        if not rows_are_whole(count, lo, hi, stored):
            plan, w.new_snapshot = _plan_per_item(cur, t, w.sid, w.key, w.values, w.blob, None,
                                                  t.sealer.digester_for(w.sid, w.key))
    created = apply(cur, t, w.sid, w.key, plan, w.values, hash_row_exists=row is not None)
    w.version = created or (before if plan.new_hash is None else before + 1)
    return plan


def _speculate(cur: Any, t: Table, w: ListWrite, planned: Optional[tuple[Plan, Snapshot]],
               expected: ListHash) -> Optional[Plan]:
    """Write an append ``planned`` against the hash row ``expected`` in one statement: the plan
    when the row still held ``expected`` (``w.new_snapshot`` and ``w.version`` set), None when
    there was no such plan or the row had changed (all undone)."""
    if planned is None:
        return None
    plan = planned[0]
    assert plan.new_hash is not None  # plan_on_hint plans only appends, each with its new hash row
    args.check_upserts(t, w.key, plan, w.values)
    version = append_if_hash(cur, t, w.sid, w.key, plan.upserts, expected, plan.new_hash, w.touch, w.riders, w.commit)
    if not version:
        return None
    w.new_snapshot, w.version, w.riders_written = planned[1], version, bool(w.riders)
    return plan


def _speculate_on_prefix(cur: Any, t: Table, w: ListWrite, planned: tuple[Plan, Snapshot],
                         snap: Snapshot) -> Optional[Plan]:
    """Write an append to the snapshot's list in one statement, accepted if the stored list is
    the snapshot's or any longer prefix of the new list (another worker appended the turns in
    between: two workers taking turns), as the stored hash row's ``(n, sum)`` says
    (:func:`append_if_one_of`). The plan (its rows trimmed to those written) or None."""
    plan = planned[0]
    assert plan.new_hash is not None  # an append Snapshot.diff planned: it has its new hash row
    args.check_upserts(t, w.key, plan, w.values)
    base = snap.hash
    if t.sealer.usable(base, w.sid, w.key)[0] is None or base.v != listsync.HASH_VERSION:
        return None
    found = append_if_one_of(cur, t, w.sid, w.key, plan.upserts, base, [plan.digests[i] for i, _ in plan.upserts],
                             plan.new_hash, w.touch, w.riders, w.commit)
    if found is None:
        return None
    (w.version, stored_n), w.riders_written = found, bool(w.riders)
    if stored_n > base.n:  # the other worker's items were stored already: not written again
        plan.upserts = [(i, d) for i, d in plan.upserts if i >= stored_n]
    w.new_snapshot = planned[1]
    return plan


def _plan_from_checkpoint(cur: Any, t: Table, w: ListWrite, stored: ListHash, encode: Any,
                          dig: Digester) -> Optional[tuple[Plan, Snapshot]]:
    """A cold save that trusts the stored checkpoint (one hash over its bytes, or fewer:
    from the hasher state this process kept, when it fits); reads the stored items after it
    only when their digest sum says one changed."""
    start = listsync.cold_start(w.blob, w.values, stored, encode, dig, w.snapshot)
    if start is None:
        return None
    tail = None
    if start.needs_read():
        cur.execute(t.statements["SELECT_ITEMS_FROM"], (w.sid, w.key, start.p))
        rows = cur.fetchall()
        if [r[0] for r in rows] != list(range(start.p, stored.n)):
            return None  # the rows do not match the hash row: the per-item path repairs
        tail = _opened(t, w.sid, w.key, rows)
    return start.plan(tail)


def _plan_per_item(cur: Any, t: Table, sid: str, k: str, items: Sequence[Any], blob: bytes,
                   stored: Optional[ListHash], dig: Digester) -> tuple[Plan, Snapshot]:
    """Plan without snapshot or checkpoint: digest every item, read the stored ones if needed."""
    datas = serde.encode_items(items, k, check=False)
    item_digests = dig.digests(datas)
    new_hash, snap = listsync.full_snapshot(blob, datas, item_digests, dig)
    # Without a hash row of ours a rewrite would do, but it cannot tell what a shrink drops:
    # with history kept, the stored items are read so the archive gets them.
    keep = stored is None and t.keep_history
    plan = None if keep else listsync.plan_cold(datas, item_digests, stored)
    if plan is None:
        have = _locked_items(cur, t, sid, k)
        if keep and not have:  # a new list, as plan_cold would have it
            plan = listsync.plan_rewrite(datas)
        elif [r[0] for r in have] == list(range(len(have))):
            plan = listsync.plan_against_stored(datas, _opened(t, sid, k, have))
        else:  # gaps in item_index: rewrite it whole
            plan = listsync.plan_rewrite(datas)
    if plan.kind != "unchanged" or stored != new_hash:
        plan.new_hash = new_hash  # (an unchanged list may still get its checkpoint moved)
    return plan, snap


def apply(cur: Any, t: Table, sid: str, k: str, plan: Plan, items: Sequence[Any], *,
          hash_row_exists: bool) -> Optional[int]:
    """Write what ``plan`` says (history archived first when kept), the hash row last; the
    version of a hash row it created (one past a value it replaces), else None."""
    if plan.new_hash is None:
        return None
    args.check_upserts(t, k, plan, items)
    created = None if hash_row_exists else create_hash_row(cur, t, sid, k, plan.new_hash)
    if t.keep_history:
        history.archive(cur, t, sid, k, plan)
    if plan.delete_all:
        cur.execute(t.statements["DELETE_ITEMS_FROM"], (sid, k, 0))
    elif plan.delete_from is not None:
        cur.execute(t.statements["DELETE_ITEMS_FROM"], (sid, k, plan.delete_from))
    write_list(cur, t, sid, k, plan.upserts, plan.new_hash, hash_row_exists)
    return created


# ---- appends and pops ------------------------------------------------------------------------


def append(cur: Any, t: Table, sid: str, k: str, datas: Sequence[bytes], hint: Optional[ListHash] = None,
           touch: bool = True, commit: bool = False) -> tuple[Optional[ListHash], ListHash]:
    """Append under the list's hash row: (the hash row found, the new one). With ``hint``
    (the hash row this process last saw) it is ONE statement: the items and the new hash
    row, the hash row written only if it still holds ``hint`` (checked under its lock); any
    other outcome is rolled back and the append is made the locked way. ``touch=False``: the
    one statement leaves the catalog row (see :class:`ListWrite`). ``commit=True`` (the call
    is the whole transaction): that statement carries the COMMIT when the cursor can
    (``append_if_hash``'s ``commit``), one round trip in all."""
    hint, hint_dig = t.sealer.usable(hint, sid, k)
    if hint is not None:
        new_hash = hint.extended(hint_dig.digests(datas, hint.n), hint_dig.empty)
        if append_if_hash(cur, t, sid, k, list(enumerate(datas, hint.n)), hint, new_hash, touch, commit=commit):
            return hint, new_hash
    row, stored, dig, have = _locked_to_change(cur, t, sid, k, "append_list")
    base = stored if stored is not None else dig.of(dig.digests(_opened(t, sid, k, have)))
    new_hash = base.extended(dig.digests(datas, base.n), dig.empty)
    if row is None:
        create_hash_row(cur, t, sid, k, new_hash)
    write_list(cur, t, sid, k, [(base.n + i, d) for i, d in enumerate(datas)], new_hash, with_hash=row is not None)
    return stored, new_hash


@dataclass
class Appended:
    """What an append to one of several lists found and wrote: the list's new length, the hash
    row it found (None: none of ours), the one it wrote (None: only its length was checked)."""

    n: int
    stored: Optional[ListHash] = None
    new: Optional[ListHash] = None


def append_lists(cur: Any, t: Table, sid: str, appends: Sequence[tuple[str, list[bytes]]], at: dict[str, int],
                 value_rows: Sequence[tuple[str, bytes]], hints: dict[str, Optional[ListHash]], touch: bool = True,
                 seen: Optional[dict[str, Optional[ListHash]]] = None) -> dict[str, Appended]:
    """:func:`append_many` as a whole transaction: when ``hints`` (the hash rows this process
    last saw) cover every list, its lengths are the ``at`` given, and the cursor can, ONE
    statement that carries its COMMIT (:func:`sql.append_lists_one_trip_tail`; with values,
    the check that none of their keys holds a list goes first in the same packet), one round
    trip, committed when it returns. Any other outcome: :func:`append_many`, the locked way.
    ``touch=False``: the one statement leaves the session's catalog row as it is (moved a moment
    ago, see :class:`ListWrite`; its hash rows' condition proves the session); the locked way
    always moves it. ``seen``: the hash rows this process last read or wrote, which ``at``'s
    lengths are checked against too (:func:`append_many`)."""
    got = (_append_lists_one_trip(cur, t, sid, appends, at, value_rows, hints, touch)
           if getattr(cur, "commits", False) else None)
    return got if got is not None else append_many(cur, t, sid, appends, at, value_rows, seen)


def _append_lists_one_trip(cur: Any, t: Table, sid: str, appends: Sequence[tuple[str, list[bytes]]],
                           at: dict[str, int], value_rows: Sequence[tuple[str, bytes]],
                           hints: Mapping[str, Optional[ListHash]], touch: bool) -> Optional[dict[str, Appended]]:
    """The one-trip append of :func:`append_lists`; None (nothing sent, or nothing written and a
    new transaction begun) when it cannot be used or its conditions did not hold."""
    if not appends or len(appends) > sql.MAX_PICKS:
        return None
    out: dict[str, Appended] = {}
    heads: list[tuple[str, int, bytes]] = []
    rows: list[tuple[str, int, bytes]] = []
    held: list[tuple[str, str, str]] = []
    for k, datas in sorted(appends):  # hash rows in key order: locked in the locked way's order
        stored, dig = t.sealer.usable(hints.get(k), sid, k)
        if stored is None or at.get(k, stored.n) != stored.n:
            return None
        new_hash = stored.extended(dig.digests(datas, stored.n), dig.empty) if datas else stored
        hk = keys.hash_key(k)
        heads.append((hk, 0, b""))
        rows += [(k, stored.n + i, d) for i, d in enumerate(datas)]
        held.append((hk, stored.text_digest(), new_hash.to_json().decode()))
        out[k] = Appended(new_hash.n, stored, new_hash if datas else None)
    rows += [(k, 0, d) for k, d in value_rows]
    hks = [h[0] for h in held]
    checked = [keys.hash_key(k) for k, datas in sorted(appends) if not datas]  # only their length
    extra = [*(catalog.row(sid) if touch else ()), *((sid, hk, 0, b"-") for hk in hks)]
    tail = sql.append_lists_one_trip_tail(len(held), len(value_rows), len(checked))
    statements = sql.upsert_rows((t.upsert[0], tail), sid, heads + t.sealer.seal_rows(sid, rows),
                                 t.statement_bytes, extra)
    if len(statements) != 1:
        return None  # more than one packet: the locked way
    statement, params = statements[0]
    condition = (*hks, *(k for k, _ in value_rows), *hks, *(h[1] for h in held), *checked,
                 *hks, *checked, *hks, *(h[2] for h in held))
    before = None
    if value_rows:
        before = (sql.with_ids(t.statements["NO_LIST_UNDER"], len(value_rows)),
                  (sid, *(keys.hash_key(k) for k, _ in value_rows)))
    try:
        cur.execute_commit(statement, params + condition, before=before)
        return out
    except Exception as exc:
        if errno_of(exc) != sql.APPEND_FAILED:
            raise
    values.start_over(cur, t)  # another writer changed a list, or a value is there: undo, then lock and read
    return None


def append_many(cur: Any, t: Table, sid: str, appends: Sequence[tuple[str, list[bytes]]],
                at: Optional[dict[str, int]] = None, value_rows: Sequence[tuple[str, bytes]] = (),
                seen: Optional[Mapping[str, Optional[ListHash]]] = None) -> dict[str, Appended]:
    """Append to several lists of one session, and write values (``value_rows``: ``(key, JSON)``) beside,
    in the caller's transaction: the hash rows locked in ONE statement, then every new item,
    hash row and value written in ONE multi-row upsert (the catalog row riding last), so 2
    statements for them all; per list key, its new length and hash rows (:class:`Appended`).
    ``at`` (list key -> length)
    makes the appends a compare-and-set: a list of another length raises
    :class:`StaleStateError`, nothing written; so does one of that length whose hash row is
    not the one ``seen`` (the hash rows this process last read or wrote) says for that
    length: another writer rewrote it to the same length (a copy over a deleted one). A list with no usable hash row of ours (a
    new list, one the Java store wrote) goes :func:`append`'s locked way; a value key that
    holds a list, or a row at version 0, goes :func:`values.write`'s."""
    hash_keys = [keys.hash_key(k) for k, _ in appends]
    heads = [*hash_keys, *(x for k, _ in value_rows for x in (k, keys.hash_key(k)))]
    cur.execute(sql.with_ids(t.statements["LOCK_HASH_ROWS"], len(heads)), (sid, *heads))
    locked = cur.fetchall()
    found = {r[0]: r[1] for r in locked}
    unversioned = {r[0] for r in locked if not int(r[2])}  # rows a writer unaware of versions left
    usable = [t.sealer.usable(ListHash.parse(found.get(keys.hash_key(k))), sid, k) for k, _ in appends]
    out: dict[str, Appended] = {}
    for (k, _), (stored, _) in zip(appends, usable):  # every length checked before any write
        want = (at or {}).get(k)
        if want is not None:
            if stored is not None:
                n = stored.n
            else:  # no hash row of ours: count the items (a new list has none; a gap raises); a value is refused
                n = list_read.counted(cur, t, sid, k)
                if n == 1 and keys.hash_key(k) not in found and values.kind(cur, t, sid, k) == "value":
                    raise WrongTypeError(sid, k, "append_lists")
            hint = (seen or {}).get(k)
            text = found.get(keys.hash_key(k))
            gone = n == 0 and text is None  # deleted since: as empty as the empty list last seen
            if n != want or (hint is not None and hint.n == n and not gone and rewritten(text, hint)):
                raise StaleStateError(k, want, n, "length")
            out[k] = Appended(n, stored)
    rows: list[tuple[str, int, bytes]] = []
    for (k, datas), hk, (stored, dig) in zip(appends, hash_keys, usable):
        if not datas:  # only checked (``at``): its length is out[k] already
            continue
        if stored is None:
            was, new_hash = append(cur, t, sid, k, datas)
            out[k] = Appended(new_hash.n, was, new_hash)
        else:
            new_hash = stored.extended(dig.digests(datas, stored.n), dig.empty)
            out[k] = Appended(new_hash.n, stored, new_hash)
            rows += [(k, stored.n + i, d) for i, d in enumerate(datas)]
            rows.append((hk, 0, new_hash.to_json()))
    for k, data in value_rows:
        if keys.hash_key(k) in found or k in unversioned:  # a list under the key, or version 0
            values.write(cur, t, sid, k, t.sealer.seal(sid, k, 0, data).decode())
        else:  # a value or nothing: row 0 upserted (its version grows by one, a new one is 1)
            rows.append((k, 0, data))
    if rows:
        write_rows(cur, t, sid, rows)
    return out


def _upsert_if_held(cur: Any, t: Table, sid: str, k: str, items: list[tuple[int, bytes]], new_hash: ListHash,
                    tail: str, condition: tuple, touch: bool, riders: Sequence[tuple[str, str, tuple[int, str]]] = (),
                    one_trip: bool = False) -> int:
    """The one-statement append: the new hash row and ``items`` in ONE multi-row upsert whose
    ``tail`` writes the hash row only if its ``condition`` parameters hold; the
    ``LAST_INSERT_ID`` the hash row's update set (0: it did not hold, everything was undone
    and a new transaction begun; or the rows needed more than one packet, nothing was sent).
    ``riders``: single values ``(key, stored text, (version, digest) seen)`` written in the same
    statement, each only if its row 0 is still the one seen (:func:`sql.with_riders`); any of
    them not holding undoes everything too.

    ``one_trip`` (a one-trip ``tail``: ``sql.APPEND_ONE_TRIP_TAIL``,
    :func:`sql.append_if_one_of_one_trip_tail`): the statement carries its COMMIT, ONE round
    trip; the hash row goes first with the sentinel text '' (its new text is in
    ``condition``) and its check row last, each rider's check row after it
    (:func:`sql.with_one_trip_riders`); a version returned is committed, and a condition that
    did not hold (or a hash row or value that was gone) is error ``sql.APPEND_FAILED``:
    nothing written or committed, 0."""
    hk = keys.hash_key(k)
    rows = t.sealer.seal_rows(sid, [(hk, 0, b"" if one_trip else new_hash.to_json())] + [(k, i, d) for i, d in items])
    lead: list = []
    checks: list = []
    if riders and len(riders) > sql.MAX_RIDERS:
        return 0
    if riders and one_trip:
        lead = [(sid, vk, 0, text.encode("utf-8")) for vk, text, _ in riders]
        checks = [(sid, vk, 0, b"") for vk, _, _ in riders]
        condition = sql.one_trip_rider_params(tail, [r[0] for r in riders], [r[2] for r in riders], condition)
        tail = sql.with_one_trip_riders(tail, len(riders))
    elif riders:
        nonce = sql.nonce(sql.MAX_RIDERS)
        marks: list = []
        for j, (vk, text, (version, digest)) in enumerate(riders):
            lead.append((sid, vk, 0, text.encode("utf-8")))
            marks += [vk, version, digest, *((nonce + j,) if j else ()), nonce + j + 1, version + 1]
        tail = sql.with_riders(tail, len(riders))
        condition = (*marks, condition[0], nonce + len(riders), *condition[1:])
    extra = [*(catalog.row(sid) if touch else ()), *([(sid, hk, 0, b"-")] if one_trip else ()), *checks]
    statements = sql.upsert_rows((t.upsert[0], tail), sid, rows, t.statement_bytes, extra, lead)
    if len(statements) != 1:
        return 0  # more than one packet: the locked way
    statement, params = statements[0]
    if one_trip:
        try:
            return cur.execute_commit(statement, params + condition)[0]
        except Exception as exc:
            if errno_of(exc) != sql.APPEND_FAILED:
                raise
        got = 0
    else:
        cur.execute(statement, params + condition)
        got = int(cur.lastrowid or 0)  # set by the hash row's update, only when its condition held
        if got >= sql.RIDER_FLOOR:  # a value's mark: the values held, the list did not
            got = 0
    if not got:
        values.start_over(cur, t)  # another writer changed the list: undo, then lock and read
    return got


def append_if_hash(cur: Any, t: Table, sid: str, k: str, items: list[tuple[int, bytes]], expected: ListHash,
                   new_hash: ListHash, touch: bool = True, riders: Sequence = (), commit: bool = False) -> int:
    """Write new items and the new hash row in ONE statement, the hash row only if it still
    holds ``expected`` (checked under its lock); returns the list's new version. 0 (all
    undone, a new transaction begun): the caller goes the locked way. ``commit=True`` (the
    caller's call is the whole transaction): the statement carries the COMMIT where it can
    (``_upsert_if_held``'s ``one_trip``); committed when the version is returned."""
    hk, h = keys.hash_key(k), expected.text_digest()
    if _commits(cur, commit):
        return _upsert_if_held(cur, t, sid, k, items, new_hash, t.statements["APPEND_ONE_TRIP_TAIL"],
                               (hk, h, hk, new_hash.to_json().decode()), touch, riders, one_trip=True)
    return _upsert_if_held(cur, t, sid, k, items, new_hash, t.statements["APPEND_IF_HASH_TAIL"], (hk, h, hk, h), touch,
                           riders)


def _commits(cur: Any, commit: bool) -> bool:
    """Whether a one-statement append goes in one round trip with its COMMIT: the caller's call
    is the whole transaction (``commit``: the statement, with any values riding in it, is
    all it writes) and the connection can."""
    return commit and getattr(cur, "commits", False)


def append_if_one_of(cur: Any, t: Table, sid: str, k: str, items: list[tuple[int, bytes]], base: ListHash,
                     digests: Sequence[int], new_hash: ListHash, touch: bool = True, riders: Sequence = (),
                     commit: bool = False) -> Optional[tuple[int, int]]:
    """Write ``items`` (indexes ``base.n`` on, their ``digests``) and the new hash row in ONE
    statement, the hash row only if the stored list is the one ``base`` describes or that list
    followed by the first items of ``items`` (its hash row's ``n`` and digest sum say which: the
    stored items are then exactly those). ``(new version, the stored length)``; None (all
    undone, a new transaction begun): the caller goes the locked way. At most
    ``sql.MAX_PICKS`` states are accepted: the base's and the latest ones. ``commit``: as
    :func:`append_if_hash`'s."""
    n_new = base.n + len(items)
    picks = [base.n] + list(range(max(base.n + 1, n_new - sql.MAX_PICKS + 1), n_new))
    sums = dict(zip(range(base.n, n_new), [base.total] + base.running_totals(digests[:-1])))
    heads = tuple(ListHash.head(m, sums[m]) for m in picks)
    hk = keys.hash_key(k)
    if _commits(cur, commit):
        got = _upsert_if_held(cur, t, sid, k, items, new_hash, sql.append_if_one_of_one_trip_tail(len(heads)),
                              (hk, *heads, *heads, hk, new_hash.to_json().decode()), touch, riders, one_trip=True)
    else:
        got = _upsert_if_held(cur, t, sid, k, items, new_hash, sql.append_if_one_of_tail(len(heads)),
                              (hk, *heads, *heads, hk, *heads), touch, riders)
    if not got:
        return None
    version, pick = sql.picked(got)
    return version, picks[pick]


def pop(cur: Any, t: Table, sid: str, k: str, model: Any = None) -> Any:
    """Remove the last item under the hash row's lock and return it decoded (an instance of
    ``model`` when given), or None when the list is empty. The hash row stays exact; an item
    that does not decode raises here, so it is not popped.

    A list whose rows do not end where its hash row says (item 0 missing, a row past its end
    or at a negative index: two index dives, whatever the list's length), whose hash row of
    this store cannot be read, or a list without one whose rows have a gap, raises
    :class:`CorruptStateError` as a read does, nothing removed: a pop never deletes a row that
    is not the list's last item, nor renumbers a damaged list. (A row lost from the middle is
    not looked for: the pop removes the right item, and the next read names the damage.)"""
    row, stored, dig, have = _locked_to_change(cur, t, sid, k, "pop_list")
    if stored is None:  # no hash row of ours: the rows as they are, indexed anew without the last
        if not have:
            return None
        rest = _opened(t, sid, k, have[:-1])
        plan = listsync.plan_rewrite(rest)
        plan.new_hash = dig.of(dig.digests(rest))
        apply(cur, t, sid, k, plan, [None] * len(rest), hash_row_exists=row is not None)
        return t.sealer.decode(sid, k, have[-1][0], have[-1][1], model)
    cur.execute(t.statements["ITEMS_ENDS"], (sid, k))
    lo, hi = cur.fetchone()
    if (lo, hi) != ((0, stored.n - 1) if stored.n else (None, None)):
        raise list_read.damaged(sid, k, stored, 0, stored.n, stored.n, lo, hi)
    if stored.n == 0:
        return None
    last = stored.n - 1
    cur.execute(t.statements["SELECT_ITEM"], (sid, k, last))
    item = cur.fetchone()
    if item is None:
        raise CorruptStateError(
            f"list {k!r} of session {sid!r} is damaged: its hash row says {stored.n} items but item "
            f"{last} is missing; save the whole list again to repair it", sid, k, last,
        )
    cur.execute(t.statements["DELETE_ITEMS_FROM"], (sid, k, last))
    new_hash = stored.without_last(dig.digest(last, t.sealer.open(sid, k, last, item[0])), dig.empty)
    write_list(cur, t, sid, k, [], new_hash, with_hash=True)
    return t.sealer.decode(sid, k, last, item[0], model)


# ---- several keys in one transaction ---------------------------------------------------------


def save_many(cur: Any, t: Table, writes: Sequence[ListWrite], prepared: Sequence[tuple[str, str, str, int]],
              expected: dict[str, int], seen: Optional[dict[str, tuple[int, str]]] = None, touch: bool = True
              ) -> tuple[dict[str, Plan], dict[str, int]]:
    """``save_many``'s transaction: every list, then every value (compare-and-set where
    ``expected`` names the key, :class:`StaleStateError` otherwise); (plans, versions).

    ``seen``: per value key, ``(version, digest)`` of row 0 as this process last read or wrote
    it; such a value is written in ONE statement if the row is still that
    (:func:`values.write_if_seen`), else the locked way. ``touch``: whether the catalog row
    must move (the lists' :class:`ListWrite` say it too); it moves at most once."""
    seen = seen or {}
    # Only the first list may speculate: a miss rolls back what the transaction wrote before it.
    # The values ride in its one-statement append when each was seen by this process (and a
    # compare-and-set expects that version): one statement for the whole save.
    riders = [(k, text, seen[k]) for _, k, text, _ in prepared
              if k in seen and expected.get(k, UNVERSIONED) in (UNVERSIONED, seen[k][0])]
    if writes and riders and len(riders) == len(prepared) <= sql.MAX_RIDERS:
        writes[0].riders, writes[0].riders_written = riders, False
    if len(writes) == 1 and (not prepared or writes[0].riders):
        writes[0].commit = True  # its one statement, the values riding, is the whole transaction
    plans = {w.key: save(cur, t, w, speculate=i == 0) for i, w in enumerate(writes)}
    versions = {w.key: w.version for w in writes}
    if writes and writes[0].riders_written:
        versions.update({k: hint[0] + 1 for k, _, hint in writes[0].riders})
        return plans, versions
    # The catalog row moves once a transaction: a list written moved it (or needed not to).
    touch = touch and not any(p.new_hash is not None for p in plans.values())
    for sid, k, text, _ in prepared:
        want = expected.get(k, UNVERSIONED)
        hint = seen.get(k)
        if hint is not None and want in (UNVERSIONED, hint[0]):
            got = values.write_if_seen(cur, t, sid, k, text, hint, touch)
            if got:
                versions[k] = got
                continue
        if want != UNVERSIONED:
            got = values.write(cur, t, sid, k, text, want)
            if got == UNVERSIONED:
                raise StaleStateError(k, want, values.cas_version(cur, t, sid, k))
            versions[k] = got
        else:
            versions[k] = values.write(cur, t, sid, k, text)
    return plans, versions
