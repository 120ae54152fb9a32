"""Change detection for lists: what a ``save_list`` must write. Pure logic, no I/O.

The hash row of a list holds ``{"fmt": "mysql-state/list-v1", "n": <length>, "sum": <hex>}``,
where ``sum`` is the sum modulo 2**128 of a BLAKE2b digest of every item's JSON, salted with
the item's index. Any change to any item's bytes changes the sum (no sampling), an append
updates it in O(new items), and a prefix of the list can be checked against it.

Within one process a :class:`Snapshot` remembers the JSON of what was last written, so a warm
``save_list`` costs one ``orjson.dumps`` of the list and a ``memcmp``, then work proportional to
the changed suffix. The snapshot is trusted only while the stored hash row still equals it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import orjson

HASH_FORMAT = "mysql-state/list-v1"
_MOD = 1 << 128
_MASK = _MOD - 1


def digest(index: int, data: bytes) -> int:
    """The index-salted 128-bit digest of one item's JSON."""
    h = hashlib.blake2b(data, digest_size=16, salt=index.to_bytes(16, "little"))
    return int.from_bytes(h.digest(), "little")


def digests(datas: Sequence[bytes], start: int = 0) -> list[int]:
    return [digest(i, d) for i, d in enumerate(datas, start)]


@dataclass(frozen=True)
class ListHash:
    """What the hash row says: the list's length and the sum of its item digests."""

    n: int
    total: int

    def to_json(self) -> bytes:
        return orjson.dumps({"fmt": HASH_FORMAT, "n": self.n, "sum": format(self.total, "032x")})

    @staticmethod
    def parse(data: Optional[str]) -> Optional["ListHash"]:
        """The hash row's content, or None when missing or in a format this store does not know."""
        if data is None:
            return None
        try:
            obj = orjson.loads(data)
            if not isinstance(obj, dict) or obj.get("fmt") != HASH_FORMAT:
                return None
            n, total = obj["n"], int(obj["sum"], 16)
            if type(n) is not int or n < 0 or not 0 <= total < _MOD:
                return None
            return ListHash(n, total)
        except (ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def of(item_digests: Sequence[int]) -> "ListHash":
        return ListHash(len(item_digests), sum(item_digests) & _MASK)

    def without_last(self, last_digest: int) -> "ListHash":
        """The hash after removing the last item, whose digest is given (a pop)."""
        return ListHash(self.n - 1, (self.total - last_digest) & _MASK)

    def extended(self, new_digests: Sequence[int]) -> "ListHash":
        """The hash after appending items with these digests (O(new items))."""
        return ListHash(self.n + len(new_digests), (self.total + sum(new_digests)) & _MASK)


@dataclass
class Plan:
    """The writes one list save needs."""

    upserts: list[tuple[int, bytes]] = field(default_factory=list)  # (index, json)
    delete_from: Optional[int] = None  # delete rows with item_index >= this
    delete_all: bool = False  # full rewrite: drop every item row first
    new_hash: Optional[ListHash] = None  # None: nothing to write at all
    kind: str = "unchanged"  # unchanged | append | suffix | rewrite | clear (for reports)

    @property
    def rows_written(self) -> int:
        return len(self.upserts)


class Snapshot:
    """The JSON of a list as this process last stored it.

    ``blob`` is ``orjson.dumps(list)``; ``ends[i]`` is the offset just past item i in ``blob``;
    ``pending`` holds appended items not yet folded into ``blob`` (kept so that an append
    costs O(new items)). Guarded by ``lock`` (one writer per list key in the process).
    """

    __slots__ = ("blob", "ends", "digests", "pending", "pending_bytes", "lock", "hash")

    def __init__(self, blob: bytes, ends: list[int], item_digests: list[int], h: ListHash) -> None:
        self.blob = blob
        self.ends = ends
        self.digests = item_digests
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.lock = threading.Lock()
        self.hash = h

    @staticmethod
    def build(blob: bytes, datas: Sequence[bytes], item_digests: list[int], h: ListHash) -> "Snapshot":
        ends, pos = [], 1
        for d in datas:
            pos += len(d)
            ends.append(pos)
            pos += 1
        return Snapshot(blob, ends, item_digests, h)

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.pending_bytes + 40 * (len(self.ends) + len(self.pending))

    def item(self, i: int) -> bytes:
        start = self.ends[i - 1] + 1 if i else 1
        return self.blob[start : self.ends[i]]

    def extend(self, datas: Sequence[bytes], new_digests: Sequence[int], h: ListHash) -> None:
        """Record an append (O(new items)); folded into ``blob`` on the next diff."""
        self.pending.extend(datas)
        self.pending_bytes += sum(map(len, datas))
        self.digests.extend(new_digests)
        self.hash = h

    def _fold(self) -> None:
        if not self.pending:
            return
        parts = self.pending
        body = self.blob[:-1]
        joined = b",".join(parts)
        pos = len(body) + (1 if self.ends else 0)
        for d in parts:
            self.ends.append(pos + len(d))
            pos += len(d) + 1
        self.blob = body + (b"," if len(body) > 1 else b"") + joined + b"]"
        self.pending = []
        self.pending_bytes = 0

    def diff(self, blob: bytes, values: Sequence, encode_items) -> tuple[Plan, Optional["Snapshot"]]:
        """Plan the writes that turn this snapshot into ``values`` (whose JSON is ``blob``).

        ``encode_items(values_slice, start)`` encodes the changed suffix only.
        Returns the plan and the snapshot after the write (None: use the cold path).
        """
        self._fold()
        old, ends, n, m = self.blob, self.ends, len(self.ends), len(values)
        if blob == old:
            return Plan(kind="unchanged"), self
        view = memoryview(old)
        # First changed index k: items before k are byte-identical (JSON values are
        # self-delimiting, and the delimiter after each item is compared too).
        if n and blob.startswith(view[: ends[-1]]) and blob[ends[-1] : ends[-1] + 1] == b",":
            k = n
        else:
            k = _first_change(blob, view, ends)
        suffix = encode_items(values[k:], k)
        start = ends[k - 1] + 1 if k else 1
        new_ends = ends[:k]
        pos = start
        for d in suffix:
            pos += len(d)
            new_ends.append(pos)
            pos += 1
        if (new_ends[-1] if new_ends else 1) != len(blob) - 1:
            return Plan(), None  # not the layout we assumed: let the caller go cold
        plan = Plan()
        new_digests = self.digests[:k]
        total = self.hash.total
        for i, d in enumerate(suffix, k):
            if i < n and d == self.item(i):
                new_digests.append(self.digests[i])
                continue
            dg = digest(i, d)
            if i < n:
                total -= self.digests[i]
            total += dg
            new_digests.append(dg)
            plan.upserts.append((i, d))
        for i in range(m, n):
            total -= self.digests[i]
        if m < n:
            plan.delete_from = m
        plan.new_hash = ListHash(m, total & _MASK)
        plan.kind = "append" if k == n else ("clear" if m == 0 else "suffix")
        snap = Snapshot(blob, new_ends, new_digests, plan.new_hash)
        return plan, snap


def _first_change(blob: bytes, view: memoryview, ends: list[int]) -> int:
    """Smallest k whose item (with its delimiter) differs; gallops from the end."""

    def same_through(i: int) -> bool:  # items 0..i unchanged, delimiter included
        return blob.startswith(view[: ends[i] + 1])

    n = len(ends)
    hi = n - 1  # invariant: item hi changed or hi is the last
    step, lo = 1, -1
    while True:
        probe = hi - step
        if probe < 0:
            break
        if same_through(probe):
            lo = probe
            break
        hi, step = probe, step * 2
    # same_through(lo) holds (or lo == -1); the first change is in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if same_through(mid):
            lo = mid
        else:
            hi = mid
    return lo + 1


def plan_against_stored(datas: Sequence[bytes], stored: Sequence[bytes]) -> Plan:
    """Plan from the stored items' JSON (cold path after a hash mismatch)."""
    plan = Plan()
    n, m = len(stored), len(datas)
    for i, d in enumerate(datas):
        if i >= n or stored[i] != d:
            plan.upserts.append((i, d))
    if m < n:
        plan.delete_from = m
    plan.kind = "clear" if m == 0 else "suffix"
    return plan


def plan_rewrite(datas: Sequence[bytes], item_digests: Sequence[int]) -> Plan:
    """Drop every item row and write the list whole."""
    return Plan(upserts=list(enumerate(datas)), delete_all=True, new_hash=ListHash.of(item_digests), kind="rewrite")


def plan_cold(datas: Sequence[bytes], item_digests: Sequence[int], stored: Optional[ListHash]) -> Optional[Plan]:
    """Plan without a snapshot; None when the stored items must be read to find the change.

    A missing or foreign hash row gives a full rewrite.
    """
    if stored is None:
        return plan_rewrite(datas, item_digests)
    new_hash = ListHash.of(item_digests)
    if stored == new_hash:
        return Plan(kind="unchanged")
    if stored.n <= len(datas) and (sum(item_digests[: stored.n]) & _MASK) == stored.total:
        return Plan(upserts=list(enumerate(datas[stored.n :], stored.n)), new_hash=new_hash, kind="append")
    return None


class SnapshotCache:
    """A byte-bounded LRU of :class:`Snapshot` per ``(session_id, key)``; thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._sizes: dict[tuple[str, str], int] = {}
        self._total = 0

    def get(self, key: tuple[str, str]) -> Optional[Snapshot]:
        with self._lock:
            snap = self._items.get(key)
            if snap is not None:
                self._items.move_to_end(key)
            return snap

    def put(self, key: tuple[str, str], snap: Optional[Snapshot]) -> None:
        with self._lock:
            self._pop(key)
            size = snap.nbytes if snap is not None else 0
            if snap is None or size > self.max_bytes:
                return
            self._items[key] = snap
            self._sizes[key] = size
            self._total += size
            while self._total > self.max_bytes:
                self._pop(next(iter(self._items)))

    def _pop(self, key: tuple[str, str]) -> None:
        if self._items.pop(key, None) is not None:
            self._total -= self._sizes.pop(key)

    def drop(self, key: Optional[tuple[str, str]] = None, session: Optional[str] = None) -> None:
        """Forget one list, every list of a session, or (no arguments) everything."""
        with self._lock:
            if key is not None:
                self._pop(key)
            elif session is not None:
                for k in [k for k in self._items if k[0] == session]:
                    self._pop(k)
            else:
                self._items.clear()
                self._sizes.clear()
                self._total = 0
