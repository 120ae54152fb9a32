"""The list read engine: whole lists, windows and tails, each checked against its hash row.

A read brings the list's hash row in the same statement (one snapshot), so the items are
checked against it at no cost per row: rows missing or out of place raise
:class:`CorruptStateError` (never a silently shorter list). :func:`read` runs on the
connection, :func:`check` decodes; :func:`get` and :func:`many` do both (on the connection,
so that a damaged or undecodable row is counted as the call's error).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import orjson

from . import keys, sql, values
from .errors import CorruptStateError, WrongTypeError
from .listsync import ListHash, total_after
from .sealer import as_bytes
from .table import Table

__all__ = ["get", "many", "read", "check", "read_range", "check_range", "read_tail", "check_tail", "long_window",
           "length", "counted", "read_many", "check_many", "read_hash", "Known", "known_of", "read_since", "check_since"]

Checked = tuple[list, int, Optional[ListHash]]
#: Items past which a whole-list read takes ``SELECT_ITEMS_LONG`` (measured, issue 21: the two
#: shapes cost the same near 100 items; at 10 the long one's sub-queries cost 1.2x, at 10 000
#: the short one's second field per row ~1.1x).
LONG_LIST = 128
#: Items past which a window or a tail takes ``SELECT_RANGE_LONG`` / ``SELECT_TAIL_LONG``
#: (measured against the indexed shapes, whose hash row comes by ``UNION ALL``: the same time at
#: 10 items, the one-column ones ~0.94x at 32-50, ~0.9x at 100, 0.77x at 1 000;
#: ``benchmarks/experiments/window_shapes.py``).
SHORT_WINDOW = 32
#: Items past which a whole read keeps what it read (:class:`Known`), so that the next is sent
#: only what is new: below, the read since costs more than the whole read (its hash row's
#: sub-query, the copy kept; 1.2x at 10 items, 0.66x at 100: ``benchmarks/paths.py``).
KEEP_LIST = 32


@dataclass(frozen=True)
class Known:
    """What a whole read of a list saw, kept by the store (per list, bounded in bytes) so that
    its next whole read of the list sends only the items after it (:func:`read_since`,
    :func:`check_since`): ``n`` items, ``blob`` them as one JSON array (only ever decoded:
    :meth:`~mysql_state.sealer.Sealer.kept_blob`),
    ``crc`` the sum over their stored texts of ``CRC32(text) * (index + 1)``, ``total`` the
    hash row's digest sum when they were read."""

    n: int
    blob: bytes = field(repr=False)  # the list's items: never in a message or a log line
    crc: int
    total: int

    @property
    def nbytes(self) -> int:
        return len(self.blob) + 64

    def extended(self, texts: Sequence[str], plains: Sequence[bytes], stored: ListHash) -> "Known":
        """This, and the items read after it (stored ``texts``, their plaintext ``plains``),
        whose hash row is ``stored``."""
        if not texts:
            return Known(self.n, self.blob, self.crc, stored.total)
        blob = self.blob[:-1] + (b"," if self.n else b"") + b",".join(plains) + b"]"
        return Known(self.n + len(texts), blob, self.crc + crc_sum(texts, self.n), stored.total)


def crc_sum(texts: Sequence[str], start: int) -> int:
    """The server's ``SUM(CRC32(state_data) * (item_index + 1))`` over the rows ``texts``
    (indexes from ``start``), computed here.

    >>> crc_sum(["1", "2"], 0) == zlib.crc32(b"1") + 2 * zlib.crc32(b"2")
    True
    """
    crc = zlib.crc32
    return sum(crc(x.encode()) * i for i, x in enumerate(texts, start + 1))


def known_of(t: Table, sid: str, k: str, texts: Sequence[str], items: list,
             stored: Optional[ListHash]) -> Optional[Known]:
    """What a whole read saw, to keep: the items' stored texts, the items decoded from them
    and the hash row read with them; None for what :func:`check_since` cannot use (no hash row
    of this store, or one keyed with a key this store lacks) and for lists of ``KEEP_LIST``
    items or fewer. The items are not opened again (:meth:`Sealer.kept_blob`)."""
    if (stored is None or len(texts) != stored.n or stored.n <= KEEP_LIST
            or t.sealer.digester_of(stored.dk, sid, k) is None):
        return None
    return Known(len(texts), t.sealer.kept_blob(texts, items), crc_sum(texts, 0), stored.total)


def read_since(cur: Any, t: Table, sid: str, k: str, m: int) -> list:
    """The items from ``m`` on, the hash row last (``SELECT_ITEMS_SINCE``)."""
    cur.execute(t.statements["SELECT_ITEMS_SINCE"], (k, m, sid, k, sid, k, m, keys.hash_key(k)))
    return cur.fetchall()


def _marked_since(marked: str) -> Optional[tuple[int, int, Optional[int], Optional[int], int, str]]:
    """The parts of a hash row marked by :func:`sql.marked_since`: its version, the list's item
    count, lowest and highest index (None: no items), the CRC sum of the items not sent, and
    the hash row's text; None for any other text.

    >>> _marked_since("\x1f2,3,0,2,77\x1f{}"), _marked_since("\x1f2,0,2\x1f{}")
    ((2, 3, 0, 2, 77, '{}'), None)
    """
    parts = _split_mark(marked, 5)
    if parts is None or parts[1] is None or parts[4] is None or parts[1] < 0 or parts[4] < 0:
        return None
    return parts  # type: ignore[return-value]


def check_since(t: Table, items: Sequence[tuple], marked: Optional[str], sid: str, k: str,
                known: Known) -> Optional[tuple[Checked, Known]]:
    """The whole list from ``known`` and the rows read after it (``items``, one column, and
    the hash row ``marked`` by :func:`sql.marked_since`), with what to keep now; None when they
    do not prove it (the caller reads the whole list).

    Proved when: the hash row is this store's; the list's rows are its ``n`` items exactly
    (count, lowest 0, highest ``n - 1``: the primary key makes them distinct); ``n >= known.n``
    and the rows sent are the ``n - known.n`` from ``known.n``; the rows not sent have the CRC
    sum ``known`` has (content damaged by hand changes it); and the hash row's digest sum is
    ``known``'s plus the new items' (a change by a writer of this store, 128 bits)."""
    head = _marked_since(marked) if marked is not None else None
    if head is None:
        return None
    version, count, lowest, highest, crc, text = head
    stored = ListHash.parse(text)
    dig = t.sealer.digester_of(stored.dk, sid, k) if stored is not None else None
    if stored is None or dig is None:
        return None
    n, m = stored.n, known.n
    if count != n or n < m or len(items) != n - m or crc != known.crc or (n and (lowest != 0 or highest != n - 1)):
        return None
    new = t.sealer.decode_items(sid, k, items, 0, m, None)  # a bad row raises, naming it
    texts = [r[0] for r in items]
    plains = as_bytes(t.sealer.plaintexts(sid, k, texts, m))
    if total_after(known.total, plains, m, dig) != stored.total:
        return None
    return (orjson.loads(known.blob) + new, version, stored), known.extended(texts, plains, stored)


def get(cur: Any, t: Table, sid: str, k: str, offset: int, limit: Optional[int], model: Any,
        seen_n: Optional[int] = None, known: Optional[Known] = None, learned: Optional[dict] = None) -> Checked:
    """A list read (whole, a window or a tail) and checked: (items, version, hash row);
    ``seen_n``: the length this process last saw. A whole read of a long list, and a window or
    a tail of more than ``SHORT_WINDOW`` items, take the one-column shapes; what those cannot
    prove (a list without a hash row of this store, damage) is read again with the indexes.

    ``known``: what this process's last whole read of the list saw; a whole read then sends
    only the items after it (:func:`check_since`), else reads the list whole. ``learned`` (a
    dict) is given, under ``"known"``, what to keep of a whole read (None: keep nothing)."""
    whole = offset == 0 and limit is None
    if whole and known is not None and model is None:
        rows = read_since(cur, t, sid, k, known.n)
        found = check_since(t, rows[:-1], rows[-1][0] if rows else None, sid, k, known)
        if found is not None:
            if learned is not None:
                learned["known"] = found[1]
            return found[0]
    got = _get(cur, t, sid, k, offset, limit, model, seen_n)
    if whole and not got[1] and got[0]:  # items and no hash row at all
        # one row 0: a value read as a list (its version); more: a list that has no hash row
        version = value_version(cur, t, sid, k, got[0][0], model) if len(got[0]) == 1 else values.HASHLESS_LIST_VERSION
        got = (got[0], version, *got[2:])
    if learned is not None and whole and model is None:
        learned["known"] = known_of(t, sid, k, got[3], got[0], got[2])
    return got[:3]


def value_version(cur: Any, t: Table, sid: str, k: str, value: Any, model: Any) -> int:
    """The version of the single value under ``k`` that a whole list read found as its one
    item (``value``): what a list compare-and-set compares with when a key holds one row and
    no hash row (a list save replaces the value), so the read gives that version, not 0 (the
    read-modify-write loop of the version read would fail for ever). Read in a second
    statement: when the key no longer holds that value alone (another writer came between),
    0, which no compare-and-set over what is stored now accepts."""
    found = values.get(cur, t, sid, k, model)
    return found.version if found is not None and not found.is_list and found.value == value else 0


def _get(cur: Any, t: Table, sid: str, k: str, offset: int, limit: Optional[int], model: Any,
         seen_n: Optional[int]) -> tuple[list, int, Optional[ListHash], Sequence[str]]:
    """:func:`get` without ``known``; and the items' stored texts of a whole read."""
    if offset != 0 or limit is not None:  # a window or a tail
        found = None
        if offset < 0 and -offset > SHORT_WINDOW:
            found = check_tail(t, read_tail(cur, t, sid, k, -offset), sid, k, -offset, limit, model)
        elif offset >= 0 and long_window(offset, limit, seen_n):
            found = check_range(t, read_range(cur, t, sid, k, offset, limit), sid, k, offset, limit, model)
        if found is None:  # short, a list without our hash row, or damaged: read with the indexes
            found = check(t, read(cur, t, sid, k, offset, limit), sid, k, offset, limit, model)
        return (*found, ())
    long = seen_n is not None and seen_n > LONG_LIST  # the whole list
    rows = read(cur, t, sid, k, offset, limit, long)
    if long and rows and _marked(rows[-1][0]) is None:
        rows = read(cur, t, sid, k, offset, limit)  # no hash row: read again with the indexes
    got = check(t, rows, sid, k, offset, limit, model)
    return (*got, [r[-1] for r in rows[:len(got[0])]])


def long_window(offset: int, limit: Optional[int], seen_n: Optional[int]) -> bool:
    """Whether a window ``offset >= 0`` is read in the one-column shape: more than
    ``SHORT_WINDOW`` items, as far as the length last seen (else the limit) tells."""
    if seen_n is not None:
        span = seen_n - offset if limit is None else min(limit, seen_n - offset)
    else:
        span = -1 if limit is None else limit
    return span > SHORT_WINDOW


def many(cur: Any, t: Table, sid: str, value_keys: Sequence[str], list_keys: Sequence[str],
         seen: Optional[dict] = None, known: Optional[Known] = None,
         learned: Optional[dict] = None) -> dict[str, tuple[Any, int]]:
    """Values and whole lists of one session, one statement: ``{key: (value or items, version)}``
    (``seen``, ``known``, ``learned``: see :func:`check_many`). What a read since ``known``
    cannot prove is read again whole, in one statement again (one snapshot)."""
    if known is not None and list_keys:
        rows = read_many(cur, t, sid, value_keys, list_keys, since=known.n)
        found = check_many(t, rows, sid, value_keys, list_keys, seen, cur, known, learned)
        if found is not None:
            return found
    rows = read_many(cur, t, sid, value_keys, list_keys)
    return check_many(t, rows, sid, value_keys, list_keys, seen, cur, None, learned)  # type: ignore[return-value]


def read(cur: Any, t: Table, sid: str, k: str, offset: int, limit: Optional[int], long: bool = False) -> list:
    """The rows of a list read (see :func:`check`): the whole list (``SELECT_ITEMS``, or
    ``SELECT_ITEMS_LONG`` when ``long``), a window, or a tail."""
    s, hk = t.statements, keys.hash_key(k)
    if offset < 0:
        cur.execute(s["SELECT_TAIL"], (sid, k, -offset, sid, hk))
    elif offset == 0 and limit is None and long:
        cur.execute(s["SELECT_ITEMS_LONG"], (k, sid, k, sid, k, sid, k, hk))
    elif offset == 0 and limit is None:
        cur.execute(s["SELECT_ITEMS"], (k, sid, k, hk))
    else:
        cur.execute(s["SELECT_WINDOW"], (sid, k, offset, sql.NO_LIMIT if limit is None else limit, sid, hk))
    return cur.fetchall()


def read_range(cur: Any, t: Table, sid: str, k: str, offset: int, limit: Optional[int]) -> list:
    """The rows of a window ``offset >= 0`` in the one-column shape (``SELECT_RANGE_LONG``)."""
    end = sql.NO_LIMIT if limit is None else offset + limit
    cur.execute(t.statements["SELECT_RANGE_LONG"], (k, sid, k, sid, k, sid, k, offset, end, keys.hash_key(k)))
    return cur.fetchall()


def read_tail(cur: Any, t: Table, sid: str, k: str, count: int) -> list:
    """The rows of the last ``count`` items in the one-column shape (``SELECT_TAIL_LONG``)."""
    cur.execute(t.statements["SELECT_TAIL_LONG"], (k, sid, k, sid, k, sid, k, sid, k, count, keys.hash_key(k)))
    return cur.fetchall()


def check_tail(t: Table, rows: Any, sid: str, k: str, count: int, limit: Optional[int],
               model: Any) -> Optional[Checked]:
    """:func:`check` for a tail read by :func:`read_tail` (the first ``limit`` of the last
    ``count`` items), or None when these rows cannot prove it (as :func:`check_range`).

    The rows hold indexes above the list's highest minus ``count``, distinct and in order:
    when the highest is the hash row's ``n - 1`` (and, for a tail longer than the list, the
    lowest is not negative), they are all in ``[max(0, n - count), n)``, so as many rows as
    that range holds are exactly it."""
    if not rows:
        return [], 0, None  # neither items nor a hash row: what check() gives
    head = _marked_head(rows[-1][0])
    if head is None:
        return None
    version, lowest, highest, stored = head
    n, items = stored.n, rows[:-1]
    start = max(0, n - count)
    below = count > n and lowest is not None and lowest < 0  # the tail reaches a row below 0
    if len(items) != n - start or (n and highest != n - 1) or below:
        return None
    if limit is not None:
        items = items[:limit]
    return t.sealer.decode_items(sid, k, items, 0, start, model), version, stored


def _split_mark(marked: str, fields: int) -> Optional[tuple]:
    """``HEAD_MARK`` + ``fields`` comma-separated integers (the first >= 0, the others may be
    empty or negative) + ``HEAD_MARK`` + a text: the integers (None where empty) and the text;
    None for any other text (an item's text that only starts like one: no JSON text starts
    with a control character, so it is damage)."""
    meta, sep, text = marked[1:].partition(sql.HEAD_MARK)
    parts = meta.split(",")
    if not (marked.startswith(sql.HEAD_MARK) and sep and len(parts) == fields and parts[0].isdigit()
            and all(not p or p.removeprefix("-").isdigit() for p in parts[1:])):  # indexes may be < 0
        return None
    return (*(int(p) if p else None for p in parts), text)


def _marked(marked: str) -> Optional[tuple[int, Optional[int], Optional[int], str]]:
    """The parts of a hash row marked by :func:`sql.marked_head` (``HEAD_MARK`` +
    ``<version>,<lowest>,<highest>`` + ``HEAD_MARK`` + its text): its version, the list's
    lowest and highest index (None: no items) and the hash row's text. None when the text only
    starts like one: an item's text that came last because the list has no hash row.

    >>> _marked("\x1f3,0,9\x1f{}"), _marked("\x1fjunk")
    ((3, 0, 9, '{}'), None)
    """
    return _split_mark(marked, 3)  # type: ignore[return-value]


def _marked_head(marked: str) -> Optional[tuple[int, Optional[int], Optional[int], ListHash]]:
    """A marked hash row's (version, lowest index, highest index, what it says); None when
    the row is not a marked hash row this store reads."""
    parts = _marked(marked)
    if parts is None:
        return None
    version, lowest, highest, text = parts
    stored = ListHash.parse(text)
    return None if stored is None else (version, lowest, highest, stored)


def check_range(t: Table, rows: Any, sid: str, k: str, offset: int, limit: Optional[int],
                model: Any) -> Optional[Checked]:
    """:func:`check` for a window read by :func:`read_range`, or None when these rows cannot
    prove it (no hash row of this store, a count that is not the hash row's, a row past the
    list's end): the caller reads the window again with the indexes, which names the damage.

    The rows hold indexes ``>= offset`` and ``< offset + limit``, distinct and in order: all in
    ``[offset, min(n, offset + limit))`` when the window ends at or before the hash row's ``n``,
    or when the highest index of the whole list is below ``n``; then as many rows as that range
    holds are exactly it."""
    if not rows:
        return [], 0, None  # neither items in the window nor a hash row: what check() gives
    head = _marked_head(rows[-1][0])
    if head is None:
        return None
    version, _, highest, stored = head
    n, items = stored.n, rows[:-1]
    stop = n if limit is None else min(n, offset + limit)
    past_end = limit is None or offset + limit > n  # the window reaches past the list's end
    if len(items) != max(0, stop - offset) or (past_end and highest is not None and highest >= n):
        return None
    return t.sealer.decode_items(sid, k, items, 0, offset, model), version, stored


def check(t: Table, rows: Any, sid: str, k: str, offset: int, limit: Optional[int], model: Any) -> Checked:
    """Items decoded and checked against the hash row read with them; (items, version, hash)."""
    if offset == 0 and limit is None and rows and len(rows[0]) == 1:
        return _check_marked(t, rows, sid, k, model)
    if offset == 0 and limit is None and (not rows or len(rows[0]) == 2):
        return _check_whole(t, rows, sid, k, model)
    rows = list(rows)
    head = None
    if rows and rows[-1][0] == sql.HEAD_INDEX:
        head = rows.pop()
    elif rows and rows[0][0] == sql.HEAD_INDEX:
        head = rows.pop(0)
    if len(rows) > 1 and rows[0][0] > rows[-1][0]:
        rows.reverse()  # a tail is read newest first
    stored = parse_head(sid, k, head[1]) if head is not None else None
    version = int(head[2]) if head is not None else 0
    got = len(rows)
    first, last = (rows[0][0], rows[-1][0]) if rows else (None, None)
    if offset < 0:
        n = stored.n if stored is not None else (rows[-1][0] + 1 if rows else 0)  # (rows[-1][0]: last)
        start = max(0, n + offset)
    else:
        n = stored.n if stored is not None else offset + got
        start = offset
    stop = n if limit is None or offset < 0 else min(n, offset + limit)
    want = max(0, stop - start)
    if got != want or (got and (first != start or last != stop - 1)):
        raise damaged(sid, k, stored, start, stop, got, first, last, sum(start <= r[0] < stop for r in rows))
    if offset < 0 and limit is not None:
        rows = rows[:limit]
    return t.sealer.decode_items(sid, k, rows, 1, start, model), version, stored


def _check_whole(t: Table, rows: Any, sid: str, k: str, model: Any) -> Checked:
    """:func:`check` for a whole list read by ``SELECT_ITEMS``: rows ``(item_index, state_data)``
    in index order, the hash row last with ``sql.HEAD_INDEX`` minus its version as index. Item indexes are
    distinct (the primary key) and ordered, so count, first and last prove them ``0..n-1``;
    with no hash row (a list another writer left without one) they still must be, as a window
    read requires."""
    stored, version = None, 0
    if rows and rows[-1][0] < sql.HEAD_INDEX:
        head = rows[-1]
        rows = rows[:-1]
        version = sql.HEAD_INDEX - int(head[0])
        stored = parse_head(sid, k, head[1])
    if rows or stored is not None:
        got = len(rows)
        n = stored.n if stored is not None else got
        first, last = (rows[0][0], rows[-1][0]) if rows else (None, None)
        if got != n or (n and (first != 0 or last != n - 1)):
            raise damaged(sid, k, stored, 0, n, got, first, last, sum(0 <= r[0] < n for r in rows))
    return t.sealer.decode_items(sid, k, rows, 1, 0, model), version, stored


def _check_marked(t: Table, rows: Any, sid: str, k: str, model: Any) -> Checked:
    """:func:`check` for a whole list read by ``SELECT_ITEMS_LONG`` (one column, the hash row
    last, marked with its version and the lowest and highest item index)."""
    if _marked(rows[-1][0]) is not None:
        return _check_run(t, rows[:-1], rows[-1][0], sid, k, model)
    return _check_run(t, rows, None, sid, k, model)


def _check_run(t: Table, items: Sequence[tuple], marked: Optional[str], sid: str, k: str, model: Any) -> Checked:
    """The items of a whole list (one column) checked against its marked hash row
    (``HEAD_MARK`` + ``<version>,<lowest>,<highest>`` + ``HEAD_MARK`` + its text; None: none)."""
    stored, version, got = None, 0, len(items)
    if marked is not None:
        parts = _marked(marked)
        if parts is None:  # not a hash row: the list has none, and its last item is not JSON
            raise damaged(sid, k, None, 0, got + 1, got + 1, None, None)
        version, first, last, head = parts
        stored = parse_head(sid, k, head)
        n = stored.n if stored is not None else got
        if got != n or (n and (first != 0 or last != n - 1)):
            raise damaged(sid, k, stored, 0, n, got, first, last)
    return t.sealer.decode_items(sid, k, items, 0, 0, model), version, stored


def parse_head(sid: str, k: str, text: Optional[str]) -> Optional[ListHash]:
    """What the hash row read with a list says (None: it has none this store reads); a hash
    row of this store that cannot be read raises :class:`CorruptStateError` (taken for none,
    the items would go unchecked)."""
    stored = ListHash.parse(text)
    if stored is None and text is not None and ListHash.damaged(text):  # (damaged(None) is False)
        raise CorruptStateError(f"list {k!r} of session {sid!r} is damaged: its hash row cannot be read "
                                f"({text[:60]!r}...); save the whole list again to repair it", sid, k)
    return stored


def damaged(sid: str, k: str, stored: Optional[ListHash], start: int, stop: int, got: int,
            first: Optional[int], last: Optional[int], inside: Optional[int] = None) -> CorruptStateError:
    """The error of a list whose rows disagree with its hash row; ``inside``: how many of the
    rows have an index in ``start..stop-1`` (None: not known), which names what is wrong."""
    said = f"its hash row says {stored.n} items" if stored is not None else "it has no hash row of this store"
    want = max(0, stop - start)
    if inside is not None:
        parts = [f"{want - inside} missing" if inside < want else "", f"{got - inside} outside it" if got > inside else ""]
        what = " and ".join(p for p in parts if p) or "in another order"
    else:
        what = "some missing, or numbered outside it"
    return CorruptStateError(
        f"list {k!r} of session {sid!r} is damaged: {said}; items {start}..{stop - 1} should be {want} rows, "
        f"but {got} are stored, numbered {first}..{last} ({what}); save the whole list again to repair it",
        sid, k,
    )


def read_hash(cur: Any, t: Table, sid: str, k: str, *, lock: bool) -> tuple[Optional[tuple], Optional[ListHash]]:
    """The list's hash row (locked with ``lock``): (the row, what it says if this store can
    read it); a hash row keyed with a key this store lacks reads as None."""
    cur.execute(t.statements["LOCK_HASH_ROW" if lock else "SELECT_HASH_ROW"], (sid, keys.hash_key(k)))
    row = cur.fetchone()
    return row, t.sealer.usable(ListHash.parse(row[0] if row else None), sid, k)[0]


def counted(cur: Any, t: Table, sid: str, k: str) -> int:
    """The number of item rows of a list without a hash row of this store (the Java store's, or
    none), which must be numbered ``0..n-1``: counted with their lowest and highest index in
    ONE statement (``ITEMS_SHAPE``: the count scans the rows; the two ends come with it); a gap,
    or a row below 0, raises :class:`CorruptStateError` as a whole read does, never a count of
    what is left."""
    cur.execute(t.statements["ITEMS_SHAPE"], (sid, k))
    count, lowest, highest = cur.fetchone()
    n = int(count)
    if n and (lowest != 0 or highest != n - 1):
        raise damaged(sid, k, None, 0, n, n, lowest, highest)
    return n


def length(cur: Any, t: Table, sid: str, k: str, *, lock: bool = False, operation: Optional[str] = None) -> int:
    """Number of items: from the hash row (no scan of the items), else counted (:func:`counted`:
    a gap raises); ``lock``
    (a transaction) locks the hash row and reads one keyed with an unknown key as missing.
    ``operation`` (an append of no items): a key that holds a single value raises
    :class:`WrongTypeError` naming it, as the append of items does."""
    cur.execute(t.statements["LOCK_HASH_ROW" if lock else "SELECT_HASH_ROW"], (sid, keys.hash_key(k)))
    row = cur.fetchone()
    stored = parse_head(sid, k, row[0] if row else None)  # one of ours that cannot be read: damage, not a count
    if lock:
        stored = t.sealer.usable(stored, sid, k)[0]
    if stored is not None:
        return stored.n
    n = counted(cur, t, sid, k)
    if operation is not None and row is None and n == 1 and values.kind(cur, t, sid, k, lock=lock) == "value":
        raise WrongTypeError(sid, k, operation)  # asked in one statement: a list of one being made is no value
    return n


def read_many(cur: Any, t: Table, sid: str, value_keys: Sequence[str], list_keys: Sequence[str],
              since: Optional[int] = None) -> list:
    """Values and whole lists of one session: one statement, rows in key order, one column
    (:func:`sql.select_many`); ``since``: the first list's items from that index on only."""
    hash_keys = [keys.hash_key(k) for k in (*value_keys, *list_keys)]
    statement, params = sql.select_many(t.quoted, sid, value_keys, list_keys, hash_keys, since)
    cur.execute(statement, params)
    return cur.fetchall()


def check_many(t: Table, rows: Sequence[tuple], sid: str, value_keys: Sequence[str],
               list_keys: Sequence[str], seen: Optional[dict] = None, cur: Any = None,
               known: Optional[Known] = None, learned: Optional[dict] = None) -> Optional[dict[str, tuple[Any, int]]]:
    """From :func:`read_many`'s rows: ``{key: (value or items, version)}``, absent keys left out.

    ``seen`` (a dict) is given what the read saw, for the writes that follow: per list key its
    hash row (a :class:`ListHash`, None when it has none this store reads), per value key with
    a row 0 and no list under it ``(version, digest of the stored text)``
    (:func:`values.write_if_seen`). ``cur``: the first list has no hash row of this store (a
    Java list): its rows are read again with their indexes, to check them. ``known``: the rows
    were read with ``since=known.n`` (:func:`check_since`); None is returned when they do not
    prove the first list. ``learned`` (a dict) is given, under ``"known"``, what to keep of
    the first list (:func:`known_of`)."""
    mark, row_mark = sql.HEAD_MARK, sql.ROW_MARK
    # The first list's items are one run of unmarked rows (key order keeps them together): the
    # marked rows around it are few, so only they are looked at one by one.
    start, end = 0, len(rows)
    while start < end and rows[start][0].startswith(mark):
        start += 1
    while end > start and rows[end - 1][0].startswith(mark):
        end -= 1
    run, first_hash = rows[start:end], None
    by_key: dict[str, list] = {}
    for (text,) in (*rows[:start], *rows[end:]):
        parts: Sequence[str] = text[2:].split(mark, 3) if text.startswith(row_mark) else ()
        # an index may be < 0 (damage): read, so that the check names it
        if len(parts) == 4 and parts[1].removeprefix("-").isdigit() and parts[2].isdigit():
            key, index, version, data = parts
            by_key.setdefault(key, []).append((int(index), data, version))
        elif first_hash is None and (_marked(text) if known is None else _marked_since(text)) is not None:
            first_hash = text
        else:  # two rows marked as its hash row, or an item of the first list that only starts
            # like a marked row (not JSON): read with the indexes, which names the row
            if cur is not None:
                get(cur, t, sid, list_keys[0], 0, None, None)
            raise damaged(sid, list_keys[0], None, 0, len(run), len(run), None, None)
    out: dict[str, tuple[Any, int]] = {}
    for k in value_keys:
        head = [(0 if r[0] == 0 else 2, r[1], r[2]) for r in by_key.get(k, ())]
        head += [(1, r[1], r[2]) for r in by_key.get(keys.hash_key(k), ())]
        found = values.value_of(t, sid, k, head, None)
        if found is not None and not found.empty:
            out[k] = (found.value, found.version)
        if seen is not None and len(head) == 1 and head[0][0] == 0:
            seen[k] = (int(head[0][2]), values.digest(head[0][1]))  # a single value: no list under it
    for i, k in enumerate(list_keys):
        if i == 0:
            if known is not None:
                since = check_since(t, run, first_hash, sid, k, known)
                if since is None:
                    return None
                got, now_known = since
                if learned is not None:
                    learned["known"] = now_known
            elif first_hash is not None:
                got = _check_run(t, run, first_hash, sid, k, None)
                if learned is not None:
                    learned["known"] = known_of(t, sid, k, [r[0] for r in run], got[0], got[2])
            elif not run:
                continue
            elif cur is not None:  # items, no hash row: read again with their indexes
                got = get(cur, t, sid, k, 0, None, None)
            else:
                raise damaged(sid, k, None, 0, len(run), len(run), None, None)
        else:
            # as SELECT_ITEMS gives it: HEAD_INDEX minus the version as its index (_check_whole reads it so)
            hash_row = [(sql.HEAD_INDEX - int(r[2]), r[1]) for r in by_key.get(keys.hash_key(k), ())]
            items = [r[:2] for r in by_key.get(k, [])]
            if not hash_row and not items:
                continue
            got = check(t, items + hash_row, sid, k, 0, None, None)
            if not hash_row and len(items) == 1:  # a value read as a list: its version (see get)
                got = (got[0], int(by_key[k][0][2]), got[2])
            elif not hash_row:  # a list that has no hash row at all (see get)
                got = (got[0], values.HASHLESS_LIST_VERSION, got[2])
        out[k] = got[:2]
        if seen is not None:
            seen[k] = got[2]
    return out
