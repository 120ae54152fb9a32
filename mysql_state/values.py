"""The value engine: single values at ``item_index = 0``, and their compare-and-set.

Functions of ``(cursor, table, ...)`` on checked, encoded input (see :mod:`mysql_state.args`);
each runs inside the connector's transaction. A value replaces a list under its key: the
key's head (hash row, row 0, row 1) is locked first, so a list writer in flight finishes and
its rows are removed with it. Versions never go back: a key's version is its row 0's, or a
list's hash row's.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple, Optional, Sequence

from . import keys, sessions, sql
from .errors import CorruptStateError, errno_of
from .listsync import ListHash
from .results import UNVERSIONED
from .table import Table

__all__ = ["key_head", "kind", "compared", "cas_version", "write", "write_if_seen", "digest", "start_over", "create",
           "compare_and_set", "insert_new", "get", "read_for_update", "value_of", "prefix_values", "ValueRead",
           "HASHLESS_LIST_VERSION"]

#: The version of a list that has no hash row (deleted by hand, or rows another writer left
#: without one): a list's version is its hash row's, and its item rows carry none of the list's,
#: so it reads as 1, as any row written without a version does (never 0: "absent"). Every read
#: gives it (``get_list_versioned``, ``get_many``, ``get_versioned``) and a compare-and-set
#: compares with it (:func:`compared`): expecting 1 replaces the list once, giving it a hash row
#: at a version past its rows'.
HASHLESS_LIST_VERSION = 1


def key_head(cur: Any, t: Table, sid: str, k: str, *, lock: bool = True) -> tuple[int, bool, bool]:
    """What is under ``k``, in one statement: (its version, 0 when absent; is it a list; was
    there a row 0). A list is a hash row (of any writer), or items past row 0 without one
    (version ``HASHLESS_LIST_VERSION``; 0 when row 0 is gone too: see :func:`compared`).

    ``lock``: waits for a list writer (who holds the hash row), so that rows it inserted are
    committed, hence seen, by the DELETE that follows.
    """
    hk = keys.hash_key(k)
    cur.execute(t.statements["LOCK_KEY_HEAD" if lock else "KEY_HEAD"], (hk, sid, k, hk))
    rows = cur.fetchall()
    hash_version = next((int(r[2]) for r in rows if r[0]), 0)
    row0 = next((int(r[2]) for r in rows if not r[0] and r[1] == 0), 0)
    # items past row 0 without a hash row (or a row at a negative index: damage) are a list's
    is_list = bool(hash_version) or any(not r[0] and r[1] != 0 for r in rows)
    if is_list and not hash_version and row0:
        row0 = HASHLESS_LIST_VERSION
    return (hash_version or row0), is_list, bool(row0)


def compared(version: int, is_list: bool) -> int:
    """The version a compare-and-set compares with, from :func:`key_head`'s (version, is_list):
    that version, 0 only when the key is absent; ``UNVERSIONED`` for a key that holds rows but
    neither row 0 nor a list's hash row (damaged: every read of it raises), which no
    compare-and-set expects (0, "absent", included: the key is there).

    >>> compared(3, True), compared(0, False), compared(0, True)
    (3, 0, -1)
    """
    return UNVERSIONED if is_list and not version else version


def cas_version(cur: Any, t: Table, sid: str, k: str) -> int:
    """:func:`compared` of the key's head, read (and locked) in one statement."""
    version, is_list, _ = key_head(cur, t, sid, k)
    return compared(version, is_list)


def kind(cur: Any, t: Table, sid: str, k: str, *, lock: bool = True) -> Optional[str]:
    """What ``k`` holds, by :func:`key_head` (one statement): ``"list"``, ``"value"`` (a
    single row 0) or None when absent."""
    _, is_list, row0 = key_head(cur, t, sid, k, lock=lock)
    return "list" if is_list else ("value" if row0 else None)


def write(cur: Any, t: Table, sid: str, k: str, text: str, expected: Optional[int] = None) -> int:
    """Write one value, removing a list under the key; returns the new version, or
    ``UNVERSIONED`` when ``expected`` (compare-and-set) is not the stored version."""
    s = t.statements
    stored, is_list, had_row0 = key_head(cur, t, sid, k)
    if expected is not None and compared(stored, is_list) != expected:
        return UNVERSIONED
    if is_list:
        cur.execute(s["DELETE_LIST_REMAINS"], (sid, k, keys.hash_key(k)))
    new = stored + 1 if expected is None else expected + 1
    cur.execute(s["UPSERT_VALUE"], (sid, k, text, new, sid))  # + the catalog row
    updated = int(cur.lastrowid or 0)  # the new version when row 0 was updated, 0 if inserted
    if updated and not had_row0 and not is_list:
        # Row 0 appeared after the lock: a list was being created beside us. It is
        # committed now (the upsert waited for it), so its remains are visible.
        cur.execute(s["DELETE_LIST_REMAINS"], (sid, k, keys.hash_key(k)))
    return updated or new


def digest(text: Any) -> str:
    """What a value hint remembers of a row 0's stored text: its SHA-256 (hex, as ``SHA2()``
    gives it), so a later write can be conditioned on the row being unchanged."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def write_if_seen(cur: Any, t: Table, sid: str, k: str, text: str, seen: tuple[int, str], touch: bool = True) -> int:
    """Write one value in ONE statement if row 0 still is what ``seen`` ``(version, digest)``
    says (read by this process, or written by it, with no list under the key); the new
    version, or 0: nothing written, go the locked way (:func:`write`). ``touch=False``: the
    catalog row is left as it is (moved a moment ago; the condition proves the session)."""
    version, h = seen
    if not touch:
        cur.execute(t.statements["UPDATE_VALUE_IF_SEEN_QUIET"], (text, version + 1, sid, k, version, h))
        return version + 1 if int(cur.lastrowid or 0) == version + 1 else 0
    affected = cur.execute(t.statements["UPDATE_VALUE_IF_SEEN"], (text, version + 1, sid, k, version, h, sid))
    updated = int(cur.lastrowid or 0) == version + 1
    if affected - updated < 1:  # no catalog row yet (a table older than the catalog): make it
        sessions.touch(cur, t, sid)
    return version + 1 if updated else 0


def insert_new(cur: Any, t: Table, sid: str, k: str, text: str) -> None:
    """Create a key known to be absent with a plain INSERT (version 1): a creator racing us
    makes it fail with a duplicate key (1062)."""
    cur.execute(t.statements["INSERT_VALUE"], (sid, k, text))
    sessions.touch(cur, t, sid)


def start_over(cur: Any, t: Table) -> None:
    """Undo what the transaction wrote so far (a one-statement write whose condition did not
    hold) and begin a new one, its isolation set again where the connections are not the
    store's own (:attr:`Table.isolate_each`)."""
    cur.execute(sql.ROLLBACK)
    if t.isolate_each:
        cur.execute(sql.READ_COMMITTED_NEXT)


def create(cur: Any, t: Table, sid: str, k: str, text: str, commit: bool = False) -> bool:
    """Create a key that is absent (no row 0, no list's hash row, no other row of the key at
    index 1 or below) in ONE statement, at version 1,
    the session's catalog row touched: True; False when the key is there, nothing written
    (``sql.CREATE_VALUE``; a creator racing this one that committed first: rolled back, and a
    new transaction begun). ``commit=True`` (the call is the whole transaction): the statement
    carries its COMMIT where the cursor can (``sql.NOTHING_AT`` then
    ``sql.CREATE_VALUE_ONE_TRIP``), one round trip; True is then committed, and a key that is
    there is an error the server stops the packet on, rolled back here, which ends the call's
    transaction (a second round trip, only then)."""
    if commit and getattr(cur, "commits", False):
        try:
            return cur.execute_commit(t.statements["CREATE_VALUE_ONE_TRIP"], (sid, k, text, sid),
                                      before=(t.statements["NOTHING_AT"], (sid, k, keys.hash_key(k))))[1] > 0
        except Exception as exc:
            if errno_of(exc) != sql.APPEND_FAILED:
                raise
        cur.execute_rollback()  # the key is there (or a creator committed first): nothing of ours written
        return False
    nonce = sql.nonce()
    n = cur.execute(t.statements["CREATE_VALUE"], (sid, k, text, sid, sid, k, keys.hash_key(k), nonce))
    if int(cur.lastrowid or 0) == nonce:  # a row 0 committed meanwhile: this statement touched the catalog
        start_over(cur, t)
        return False
    return n > 0


def compare_and_set(cur: Any, t: Table, sid: str, k: str, text: str, expected: int, commit: bool = False) -> int:
    """Write only if the key's version is ``expected`` (0: absent; ``UNVERSIONED``: whatever
    it is); the new version, or ``UNVERSIONED`` when nothing was written. ``commit``: as
    :func:`create`'s (the call is the whole transaction)."""
    if expected == UNVERSIONED:
        return write(cur, t, sid, k, text)
    if expected == 0:  # only while absent: one statement (a creator racing us that commits first wins)
        return 1 if create(cur, t, sid, k, text, commit) else UNVERSIONED
    return write(cur, t, sid, k, text, expected)


class ValueRead(NamedTuple):
    """What a read of a key's row 0 and hash row found."""

    value: Any  # row 0's value (None: none)
    version: int  # the key's (a list's is its hash row's)
    empty: bool  # a list with no item 0: reads as absent (a list whose first item is null reads as None)
    hash_text: Optional[str]  # the list's hash row (None: the key is a value)

    @property
    def is_list(self) -> bool:
        return self.hash_text is not None


def get(cur: Any, t: Table, sid: str, k: str, model: Any) -> Optional[ValueRead]:
    """One statement: :func:`value_of` of the key's row 0 and hash row; None when absent."""
    hk = keys.hash_key(k)
    cur.execute(t.statements["SELECT_VALUE"], (hk, sid, k, hk))
    return value_of(t, sid, k, cur.fetchall(), model)


def read_for_update(cur: Any, t: Table, sid: str, k: str) -> list:
    """The rows :func:`get` reads (for :func:`value_of`), locked until the transaction ends."""
    hk = keys.hash_key(k)
    cur.execute(t.statements["SELECT_VALUE_FOR_UPDATE"], (hk, sid, k, hk))
    return cur.fetchall()


def value_of(t: Table, sid: str, k: str, rows: Sequence[tuple], model: Any) -> Optional[ValueRead]:
    """From rows ``(kind, state_data, version)`` of a key (kind 1 or True: its hash row; 0 or
    False: row 0; 2: another of its rows, text not needed): what they hold (:class:`ValueRead`),
    or None when the key is absent. Rows of the key without row 0 are damage, never absence: a
    :class:`CorruptStateError` naming the key (unless a list's hash row says it is empty). The
    version is the list's hash row's, or row 0's when the key holds that row alone (a value);
    a list without a hash row (row 0 and another row) has ``HASHLESS_LIST_VERSION``."""
    listed = next((r for r in rows if r[0] == 1), None)
    row0 = next((r for r in rows if r[0] == 0), None)
    if listed is None and row0 is None:
        if any(r[0] == 2 for r in rows):
            raise CorruptStateError(
                f"key {k!r} of session {sid!r} is damaged: it has rows but no row 0 (a list that lost "
                "item 0 and its hash row, or a value's row moved off index 0); save it again to repair it",
                sid, k)
        return None
    if row0 is None and listed is not None:  # a list with no item 0: empty, or damaged
        stored = t.sealer.usable(ListHash.parse(listed[1]), sid, k)[0]
        if (stored is not None and stored.n) or (stored is None and any(r[0] == 2 for r in rows)):
            said = f"its hash row says {stored.n} items" if stored is not None else "it has items"
            raise CorruptStateError(
                f"list {k!r} of session {sid!r} is damaged: {said}, but "
                f"item 0 is missing; save the whole list again to repair it", sid, k)
    value = None if row0 is None else t.sealer.decode(sid, k, 0, row0[1], model)
    head = listed if listed is not None else row0
    assert head is not None  # one of the two is there (the key is not absent)
    version = int(head[2])
    if listed is None and any(r[0] == 2 for r in rows):  # a list without a hash row: item 0 has no list's version
        version = HASHLESS_LIST_VERSION
    return ValueRead(value, version, listed is not None and row0 is None, listed[1] if listed is not None else None)


def prefix_values(cur: Any, t: Table, sid: str, prefix: str) -> list[tuple[str, Any, int]]:
    """``(key, value, version)`` of the single values of ``sid`` whose key starts with
    ``prefix``, in key order, read as one primary-key range (keys holding a list left out: the
    hash rows are read too, and item 1 of a list without one; the exact prefix tested,
    whatever the collation). A key with rows but no row 0 is damage: :class:`CorruptStateError`
    naming it, as :func:`get` raises (never left out as if absent)."""
    statement, params = sql.select_prefix(t.quoted, sid, prefix, t.exact_keys)
    cur.execute(statement, params)
    rows = [r for r in cur.fetchall() if r[0].startswith(prefix)]
    suffix = keys.HASH_SUFFIX
    hashed = {k[: -len(suffix)] for k, _, _, _ in rows if k.endswith(suffix)}
    others = {k for k, _, _, index in rows if index != 0 and not k.endswith(suffix)}
    row0 = {k for k, _, _, index in rows if index == 0 and not k.endswith(suffix)}
    for k in sorted(others - row0 - hashed):
        value_of(t, sid, k, [(2, None, 0)], None)  # rows, no row 0, no hash row: raises, naming it
    return [(k, t.sealer.decode(sid, k, 0, data), int(version)) for k, data, version, index in rows
            if index == 0 and k not in hashed and k not in others and not k.endswith(suffix)]

