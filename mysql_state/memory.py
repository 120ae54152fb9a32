"""What one process remembers of lists, kept right by :class:`~mysql_state.calls.Calls` around each call.

* snapshots (:class:`~mysql_state.listsync.Snapshot`): the JSON last written per list, so a
  warm ``save_list`` costs a comparison and its changed suffix (bounded in bytes);
* hints: the hash row last seen per list, so an append is ONE statement (bounded in entries);
* missed: lists whose last one-statement write missed (another worker writes them), so the
  next save goes the locked way (3 round trips) instead of speculating again (5 when it misses);
* values: per value key, ``(version, SHA-256 of the stored text)`` of row 0 as last read by
  ``get_many`` or written here, so ``save_many`` writes it in ONE statement conditioned on it
  (:func:`mysql_state.values.write_if_seen`);
* known (:class:`~mysql_state.list_read.Known`): per list, what this process's last whole
  read saw, so the next whole read sends only the items after it (bounded in bytes, as the
  snapshots); a read proves it before it uses it (:func:`~mysql_state.list_read.check_since`);
  kept across a transaction that only appended to the list (``tx_appended`` marks such lists,
  so that their next whole read keeps what it reads);
* damaged: lists a read found damaged, so their next save rewrites the rows instead of
  trusting the hash row (which a row damaged by hand still matches);
* catalog touches: when this process last moved a session's catalog row (its activity time),
  so the one-statement writes touch it at most once every ``catalog.TOUCH_EVERY`` seconds
  (:meth:`ListMemory.catalog_due`): a row less to write per turn, and the activity time at
  most ``catalog.ACTIVITY_LAG`` behind.

Each is a hint only: every write checks it against the stored row under its lock, so a
stale entry costs a round trip, never a wrong row. Keys are ``(packed session id, key)``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Container, Iterable, Iterator, Optional, Sequence

from . import catalog
from .cache import LRU
from .errors import CorruptStateError
from .list_read import Known
from .listsync import ListHash, Snapshot

__all__ = ["HASH_HINTS", "ListMemory"]

HASH_HINTS = 4096  # lists whose last seen hash row is remembered (for one-statement appends)
Key = tuple[str, str]


class ListMemory:
    """The snapshots, hints and damaged marks of one store (see the module doc)."""

    def __init__(self, snapshot_bytes: int) -> None:
        self.snapshots: LRU[Key, Snapshot] = LRU(max_bytes=snapshot_bytes, size_of=lambda s: s.nbytes)
        self.hints: LRU[Key, ListHash] = LRU(max_entries=HASH_HINTS)
        #: The list's version when its hint was seen, where known (see :meth:`hint`).
        self.hint_versions: LRU[Key, int] = LRU(max_entries=HASH_HINTS)
        self.missed: LRU[Key, bool] = LRU(max_entries=HASH_HINTS)
        self.values: LRU[Key, tuple[int, str]] = LRU(max_entries=HASH_HINTS)
        self.known: LRU[Key, Known] = LRU(max_bytes=snapshot_bytes, size_of=lambda k: k.nbytes)
        #: Lists a transaction of this process appended to (their hints are gone with it).
        self.tx_appended: LRU[Key, bool] = LRU(max_entries=HASH_HINTS)
        #: Lists a read found damaged (shared with transactions, which add to it and rewrite).
        self.damaged: set[Key] = set()
        self.touched: LRU[str, float] = LRU(max_entries=HASH_HINTS)

    @property
    def keeps_reads(self) -> bool:
        """Whether what whole reads saw is kept (``snapshot_bytes`` is not 0): else a read does
        not build it."""
        return self.known.max_bytes != 0

    def reading(self, key: Key) -> tuple[Optional[Known], Optional[dict]]:
        """For a whole read of a list: what this process's last whole read of it kept, and a
        dict for the read to put what to keep in (``"known"``), or None: keep nothing (nothing
        is kept with ``snapshot_bytes=0``, nor of a list this process has not seen: a list read
        once is not kept, one read, written or appended to in a transaction before is). Then
        :meth:`read_kept`."""
        known = self.known.get(key)
        keep = self.keeps_reads and (known is not None or self.hints.get(key) is not None or bool(self.tx_appended.get(key)))
        return known, ({} if keep else None)

    def read_kept(self, key: Key, learned: Optional[dict]) -> None:
        """Keep what a whole read put in ``learned`` (:meth:`reading`)."""
        if learned and "known" in learned:
            self.known.put(key, learned["known"])

    def catalog_due(self, sid: str) -> bool:
        """Whether a write of session ``sid`` must move its catalog row: this process has not
        for ``catalog.TOUCH_EVERY`` seconds. Only a write conditioned on a row of the session
        (which proves the session, so its catalog row, still exists) may skip it."""
        last = self.touched.get(sid)
        return last is None or time.monotonic() - last >= catalog.TOUCH_EVERY

    def catalog_touched(self, sid: str, at: float) -> None:
        """A write that began at ``at`` (``time.monotonic()``) moved the catalog row of ``sid``."""
        self.touched.put(sid, at)

    def hint(self, key: Key, stored: Optional[ListHash], version: Optional[int] = None) -> None:
        """The list's hash row as last seen (None: forget it), and its version when known: a
        compare-and-set on another version than the one this process saw the hint at cannot
        tell anything from the hint (the version came from elsewhere), so it checks the
        version only; None: not known, the hint is checked too."""
        self.hints.put(key, stored)
        self.hint_versions.put(key, version if stored is not None else None)

    def saved(self, key: Key, snap: Optional[Snapshot], missed: bool = False, kind: str = "rewrite",
              version: Optional[int] = None) -> None:
        """A list save wrote ``snap``: keep it, and its hash row as a hint for appends;
        ``missed``: its one-statement write missed (next time, the locked way); ``kind``: the
        plan's (what a read saw stays a base for the next read after an append only)."""
        if kind not in ("append", "unchanged"):
            self.known.drop(key)
        self.snapshots.put(key, snap)
        self.hint(key, snap.hash if snap is not None else None, version)
        self.missed.put(key, True if missed else None)
        self.damaged.discard(key)

    def read(self, key: Key, stored: Optional[ListHash], version: Optional[int] = None) -> None:
        """A strong read saw the whole list, whole, and its hash row ``stored`` (None: none this
        store reads): a damage an earlier read found is gone (repaired since)."""
        self.hint(key, stored, version)
        self.damaged.discard(key)

    def after_read(self, key: Key, stored: Optional[ListHash], version: Optional[int], consistency: str, *,
                   whole: bool = False, exact: bool = False) -> None:
        """What a read of list ``key`` (its hash row ``stored``, None: none this store reads, at
        ``version``) teaches the writes that follow. A strong read: ``whole`` (the whole list,
        found whole) is :meth:`read`; ``exact`` (the key's hash row as it is now, a value read's)
        replaces the hint, None included when there was one; else a hash row seen becomes the
        hint. Any other read (a replica's may be behind) replaces the hint only when it differs,
        with the version it showed, so a compare-and-set at a newer version this process wrote
        itself is compared by version."""
        if consistency != "strong":
            if stored != self.hints.get(key):
                self.hint(key, stored, version)
        elif whole:
            self.read(key, stored, version)
        elif stored is not None or (exact and self.hints.get(key) is not None):
            self.hint(key, stored, version)

    def value(self, key: Key, seen: Optional[tuple[int, str]]) -> None:
        """Row 0 of a value key is ``seen`` ``(version, digest)``: read strongly, or written
        here (None: forget it)."""
        self.values.put(key, seen)

    def appended(self, key: Key, snap: Optional[Snapshot], stored: Optional[ListHash], datas: Sequence[bytes],
                 new_hash: ListHash) -> None:
        """An append found ``stored`` and wrote ``new_hash``: the snapshot follows if it was
        the stored list's, else it goes."""
        if snap is not None and stored == snap.hash:
            snap.extend(datas, new_hash)
            self.snapshots.put(key, snap)
        else:
            self.snapshots.drop(key)
        self.hint(key, new_hash)

    def replaced(self, sid: str, k: Optional[str] = None) -> None:
        """Key ``k`` of session ``sid`` (None: the whole session, as :meth:`forget_all_of`
        names one) was deleted or written whole (a value over a list, a rewrite in a
        transaction): :meth:`forget` it, damage marks included."""
        if k is not None:
            self.forget((sid, k))
            self.damaged.discard((sid, k))
        else:
            self.forget(session=sid)
            self.damaged.difference_update({d for d in self.damaged if d[0] == sid})

    def forget(self, key: Optional[Key] = None, session: Optional[str] = None) -> None:
        """Drop what is remembered of a list, a session, or (no argument) everything (damage
        marks stay: the next save of a damaged list still rewrites it)."""
        self.snapshots.drop(key, session)
        self.hints.drop(key, session)
        self.hint_versions.drop(key, session)
        self.missed.drop(key, session)
        self.values.drop(key, session)
        self.known.drop(key, session)
        self.tx_appended.drop(key, session)
        if key is None:  # a whole session (its catalog row may be gone), or everything
            self.touched.drop(session)

    def forget_all_of(self, touched: Iterable[tuple[str, Optional[str]]], appended: Container[Key] = ()) -> None:
        """Drop the lists (``(sid, key)``) and whole sessions (``(sid, None)``) written, but
        of lists only appended to (``appended``) keep what a whole read saw: it stays the base
        of the next read, which proves it against the stored list (:func:`list_read.check_since`)."""
        for sid, k in sorted(touched, key=lambda x: x[1] is None):  # whole sessions last
            if k is None:
                self.forget(session=sid)
            else:
                known = self.known.get((sid, k)) if (sid, k) in appended else None
                self.forget((sid, k))
                if (sid, k) in appended:
                    self.tx_appended.put((sid, k), True)
                if known is not None:
                    self.known.put((sid, k), known)

    @contextlib.contextmanager
    def noting_damage(self) -> Iterator[None]:
        """Rows a read finds damaged: forget the list and mark it for a rewrite on save."""
        try:
            yield
        except CorruptStateError as exc:
            self.forget((exc.session_id, exc.key))
            self.damaged.add((exc.session_id, exc.key))
            raise
