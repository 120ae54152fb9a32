"""Change detection for lists: what a ``save_list`` must write. Pure logic, no I/O.

The hash row of a list (format ``mysql-state/list-v3``) holds:

* ``n`` and ``sum``: the length, and the sum modulo 2**128 of an index-salted BLAKE2b digest of
  every item's JSON. Any change to any item changes it, and an append updates it in O(new items).
* a checkpoint ``p``, ``plen``, ``ph``, ``psum``: the items ``0..p-1`` are, in the list's JSON
  ``[item0,item1,...]``, the ``plen`` bytes after the ``[``; ``ph`` is their BLAKE3-256 (keyed
  with the digest key for an encrypted store) and ``psum`` the sum of their digests. A save puts
  the checkpoint just before the last item.

So a save in a process that has never seen the list (a cold save: another worker, a restart)
costs one ``orjson.dumps`` of the list and ONE hash over one byte range ("the first p items are
unchanged"), then per-item work on the few items after the checkpoint only: the turn appended,
or the last message that grew in place. Anything else (an edit in the middle, a compaction) is
found by the per-item path, item digests and, where needed, the stored items themselves. The
format ``mysql-state/list-v2`` is the same with ``ph`` the SHA-256 (HMAC-SHA-256 when keyed) of
the checkpoint's bytes, ``mysql-state/list-v1`` (``n`` and ``sum`` only) reads as a checkpoint at
0; both are read, checked with their own hash, and written as v3 by the next write (a save
re-hashes the checkpoint once with BLAKE3; an append or a pop, which do not have the list's
bytes, move the checkpoint to 0). BLAKE3 because the checkpoint is the one hash over the whole
list that a process which never saw it must pay: 0.2-0.4x SHA-256's time on the lists measured
(``benchmarks/DESIGN-issue21.md``). A format this store does not know (the Java store's rows)
reads as no hash row at all.

A process that saw the list (its snapshot) but did not write the stored row (another worker
took the turn in between) checks the stored checkpoint by extending the hasher state it kept at
its own checkpoint over the bytes stored since (:func:`cold_start`'s ``seen``): O(the turns in
between), not O(the list), when the new JSON starts with the bytes it hashed.

Within one process a :class:`Snapshot` remembers the JSON of what was last written, so a warm
``save_list`` costs one ``orjson.dumps`` of the list and a ``memcmp``, then work proportional to
the changed suffix. The snapshot is trusted only while the stored hash row still equals it.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import blake3
import orjson

from .serde import compact

#: The format written; its number is :data:`HASH_VERSION` (``ListHash.v``).
HASH_FORMAT = "mysql-state/list-v3"
HASH_VERSION = 3
#: The formats read, by version (older ones are upgraded to :data:`HASH_FORMAT` by the next write).
_VERSION_OF = {"mysql-state/list-v1": 1, "mysql-state/list-v2": 2, HASH_FORMAT: HASH_VERSION}
_FORMAT_OF = {v: f for f, v in _VERSION_OF.items()}
_MOD = 1 << 128
_MASK = _MOD - 1

Encoder = Callable[[Sequence[Any], int], list]


class Digester:
    """The digests of a list: index-salted BLAKE2b per item, BLAKE3 of the checkpoint's bytes
    (SHA-256 for the rows of formats v1 and v2, which are read and upgraded).

    Keyed (``key``, recorded in the hash row as ``kid``) for an encrypted store, so the table
    holds no digest of the plaintext that could be matched against guesses.
    """

    __slots__ = ("key", "kid", "empty", "_b3key")

    def __init__(self, key: Optional[bytes] = None, kid: Optional[str] = None) -> None:
        self.key, self.kid = key, kid
        # keyed BLAKE3 takes exactly 32 bytes: a derived digest key is (HMAC-SHA-256)
        self._b3key = None if not key else (key if len(key) == 32 else hashlib.sha256(key).digest())
        self.empty = self.prefix().digest()

    def digest(self, index: int, data: bytes) -> int:
        """The index-salted 128-bit digest of one item's JSON."""
        h = hashlib.blake2b(data, digest_size=16, salt=index.to_bytes(16, "little"), key=self.key or b"")
        return int.from_bytes(h.digest(), "little")

    def digests(self, datas: Sequence[bytes], start: int = 0) -> list[int]:
        d = self.digest
        return [d(i, x) for i, x in enumerate(datas, start)]

    def prefix(self, version: int = HASH_VERSION) -> Any:
        """A fresh hasher for the checkpoint's bytes, of the format ``version`` (v3: BLAKE3;
        v1, v2: SHA-256); keyed when the digester is."""
        if version == HASH_VERSION:
            return blake3.blake3(key=self._b3key) if self._b3key else blake3.blake3()
        return hmac.new(self.key, digestmod=hashlib.sha256) if self.key else hashlib.sha256()

    def of(self, item_digests: Sequence[int]) -> "ListHash":
        """A hash with its checkpoint at 0 (use :func:`full_snapshot` to place one)."""
        return ListHash(len(item_digests), sum(item_digests) & _MASK, 0, 0, self.empty, 0, self.kid)


PLAIN = Digester()
EMPTY_PREFIX = PLAIN.empty
EMPTY_SHA256 = PLAIN.prefix(2).digest()  # a v1 row's checkpoint (at 0)


def digest(index: int, data: bytes) -> int:
    """The unkeyed digest of one item's JSON (see :class:`Digester`)."""
    return PLAIN.digest(index, data)


def digests(datas: Sequence[bytes], start: int = 0) -> list[int]:
    return PLAIN.digests(datas, start)


def total_after(total: int, datas: Sequence[bytes], start: int, dig: Digester = PLAIN) -> int:
    """The digest sum of a list whose sum was ``total`` once the items ``datas`` (their JSON)
    follow at ``start``: what a hash row says after an append of them."""
    return (total + sum(dig.digests(datas, start))) & _MASK


@dataclass(frozen=True)
class ListHash:
    """What the hash row says: length, digest sum, and the checkpoint (see the module doc)."""

    n: int
    total: int
    p: int = 0
    plen: int = 0
    ph: bytes = EMPTY_PREFIX
    psum: int = 0
    dk: Optional[str] = None  # the id of the key the digests are keyed with (None: unkeyed)
    v: int = HASH_VERSION  # the format read (1, 2: ph is SHA-256) or written (3: BLAKE3)

    def to_json(self) -> bytes:
        """The hash row's text, in the format it was read in (``v``): re-serialising a row read
        gives its text back, which is what a conditional write compares. Made once (the hash
        written by one append is the next one's expected row)."""
        made = self.__dict__.get("_json")
        if made is None:
            obj: dict[str, Any] = {"fmt": _FORMAT_OF[self.v], "n": self.n, "sum": format(self.total, "032x")}
            if self.v != 1:
                obj.update(p=self.p, plen=self.plen, ph=self.ph.hex(), psum=format(self.psum, "032x"))
                if self.dk is not None:
                    obj["dk"] = self.dk
            made = compact(orjson.dumps(obj))  # kept in the hints cache
            object.__setattr__(self, "_json", made)  # a cache, not a field: eq and repr ignore it
        return made

    def text_digest(self) -> str:
        """The SHA-256 (hex, as ``SHA2()`` gives it) of :meth:`to_json`: what a one-statement
        append compares the stored hash row with. Made once."""
        made = self.__dict__.get("_sha")
        if made is None:
            made = hashlib.sha256(self.to_json()).hexdigest()
            object.__setattr__(self, "_sha", made)
        return made

    @staticmethod
    def head(n: int, total: int) -> bytes:
        """The leading bytes of the text of any hash row this store writes (the current format)
        whose list has ``n`` items with digest sum ``total``, up to ``,"p":``: what
        :func:`sql.append_if_one_of_tail` compares.

        >>> h = ListHash(3, 5, 2, 40)
        >>> h.to_json().startswith(ListHash.head(3, 5) + b',"p":')
        True
        """
        return b'{"fmt":"%s","n":%d,"sum":"%032x"' % (_FORMAT_OF[HASH_VERSION].encode(), n, total)

    @staticmethod
    def parse(data: Optional[str]) -> Optional["ListHash"]:
        """The hash row's content, or None when missing or in a format this store does not know."""
        if data is None:
            return None
        try:
            obj = orjson.loads(data)
            if not isinstance(obj, dict) or obj.get("fmt") not in _VERSION_OF:
                return None
            v = _VERSION_OF[obj["fmt"]]
            n, total = obj["n"], int(obj["sum"], 16)
            if type(n) is not int or n < 0 or not 0 <= total < _MOD:
                return None
            if v == 1:
                return ListHash(n, total, ph=EMPTY_SHA256, v=1)
            p, plen, ph, psum = obj["p"], obj["plen"], bytes.fromhex(obj["ph"]), int(obj["psum"], 16)
            dk = obj.get("dk")
            if (type(p) is not int or type(plen) is not int or not 0 <= p <= n or plen < 0 or len(ph) != 32
                    or not (dk is None or isinstance(dk, str))):
                return None
            return ListHash(n, total, p, plen, ph, psum & _MASK, dk, v)
        except (ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def damaged(data: Optional[str]) -> bool:
        """Whether ``data`` is a hash row of this store that cannot be read: it begins as this
        store's rows begin but is not JSON (cut short), or names a format this store knows and
        its fields do not parse. Damage, not another writer's row (the Java store's; a newer
        version's format), which reads as no hash row.

        >>> text = ListHash(3, 5).to_json().decode()
        >>> ListHash.damaged(text), ListHash.damaged(text[:40]), ListHash.damaged('{"fmt":"java"}')
        (False, True, False)
        """
        if data is None or not data.startswith('{"fmt":"mysql-state/') or ListHash.parse(data) is not None:
            return False
        try:
            obj = orjson.loads(data)
        except ValueError:
            return True
        return not isinstance(obj, dict) or obj.get("fmt") in _VERSION_OF

    def extended(self, new_digests: Sequence[int], empty_prefix: bytes = EMPTY_PREFIX) -> "ListHash":
        """The hash after appending items with these digests (O(new items); the checkpoint stays,
        or, in a row of an older format, moves to 0: written as the current format).
        ``empty_prefix``: the digester's ``empty``."""
        n, total = self.n + len(new_digests), (self.total + sum(new_digests)) & _MASK
        if self.v != HASH_VERSION:
            return ListHash(n, total, 0, 0, empty_prefix, 0, self.dk)
        return ListHash(n, total, self.p, self.plen, self.ph, self.psum, self.dk)

    def running_totals(self, new_digests: Sequence[int]) -> list[int]:
        """The digest sums after appending each of the items with these digests, in turn."""
        out, total = [], self.total
        for d in new_digests:
            total = (total + d) & _MASK
            out.append(total)
        return out

    def without_last(self, last_digest: int, empty_prefix: bytes = EMPTY_PREFIX) -> "ListHash":
        """The hash after removing the last item, whose digest is given (a pop)."""
        total = (self.total - last_digest) & _MASK
        if self.p <= self.n - 1 and self.v == HASH_VERSION:
            return ListHash(self.n - 1, total, self.p, self.plen, self.ph, self.psum, self.dk)
        return ListHash(self.n - 1, total, 0, 0, empty_prefix, 0, self.dk)  # the checkpoint covered it


def verify(h: ListHash, datas: Sequence[bytes], dig: Digester = PLAIN) -> bool:
    """Whether ``h`` describes exactly the items whose JSON is ``datas`` (tests, the doctor)."""
    if h.dk != dig.kid or h.n != len(datas) or h.total != sum(dig.digests(datas)) & _MASK or h.p > len(datas):
        return False
    prefix = b",".join(datas[: h.p])
    hasher = dig.prefix(h.v)
    hasher.update(prefix)
    return len(prefix) == h.plen and hasher.digest() == h.ph and sum(dig.digests(datas[: h.p])) & _MASK == h.psum


@dataclass
class Plan:
    """The writes one list save needs."""

    upserts: list[tuple[int, bytes]] = field(default_factory=list)  # (index, json)
    delete_from: Optional[int] = None  # delete rows with item_index >= this
    delete_all: bool = False  # full rewrite: drop every item row first
    new_hash: Optional[ListHash] = None  # None: nothing to write at all
    kind: str = "unchanged"  # unchanged | append | suffix | shrink | rewrite | clear
    #: The digests of the upserted items by index, where the planner computed them (a warm plan).
    digests: dict[int, int] = field(default_factory=dict)

    @property
    def rows_written(self) -> int:
        return len(self.upserts)


def _kind(k: int, n: int, m: int) -> str:
    """The kind of a save whose first changed index is ``k`` (old length n, new m)."""
    if m == 0:
        return "clear"
    if m < n:
        return "shrink"
    return "append" if k >= n else "suffix"


def _ends_of(datas: Sequence[bytes], start: int) -> list[int]:
    """Offsets just past each item, the first starting at ``start``."""
    out, pos = [], start
    for d in datas:
        pos += len(d)
        out.append(pos)
        pos += 1
    return out


def _checkpoint(dig: Digester, blob: bytes, m: int, end_of: Callable[[int], int], total: int, last_digest: int,
                hasher: Any, hashed_to: int) -> tuple[ListHash, Any]:
    """The hash of a list of ``m`` items whose JSON is ``blob``, checkpoint before its last item.

    ``hasher`` holds the SHA-256 of ``blob[1:hashed_to]`` (a prefix already hashed, or None);
    returns the hash and the hasher state at the checkpoint (for the next warm save).
    """
    p = max(m - 1, 0)
    end = end_of(p - 1) if p else 1
    if hasher is None or hashed_to > end:
        hasher, hashed_to = dig.prefix(), 1
    else:
        hasher = hasher.copy()
    hasher.update(memoryview(blob)[hashed_to:end])
    psum = (total - last_digest) & _MASK if m else 0
    return ListHash(m, total & _MASK, p, end - 1, hasher.copy().digest(), psum, dig.kid), hasher


class Snapshot:
    """The JSON of a list as this process last stored it.

    ``blob`` is ``orjson.dumps(list)``; the offsets just past items ``base..n-1`` are in
    ``ends`` (a snapshot made by a cold save knows them only after the checkpoint);
    ``first_end`` is the offset just past item ``base-1`` (0 when ``base`` is 0). ``hasher``
    holds the BLAKE3 state over the checkpoint's bytes (``blob[1:1 + hash.plen]``). ``pending`` holds appended items not yet
    folded into ``blob`` (an append costs O(new items)). Guarded by ``lock`` (one writer per
    list key in the process).
    """

    __slots__ = ("blob", "n", "base", "first_end", "ends", "hasher", "pending", "pending_bytes", "lock", "hash", "dig")

    def __init__(self, blob: bytes, n: int, base: int, first_end: int, ends: list[int], hasher: Any,
                 h: ListHash, dig: Digester = PLAIN) -> None:
        self.dig = dig
        # compact: a snapshot of a short list would keep orjson's whole reservation (serde.compact)
        self.blob, self.n, self.base, self.first_end, self.ends = compact(blob), n, base, first_end, ends
        self.hasher = hasher
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.lock = threading.Lock()
        self.hash = h

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.pending_bytes + 40 * (len(self.ends) + len(self.pending))

    def end(self, i: int) -> int:
        """The offset just past item ``i`` (``i >= base - 1``)."""
        return self.first_end if i == self.base - 1 else self.ends[i - self.base]

    def item(self, i: int) -> bytes:
        return self.blob[self.end(i - 1) + 1 : self.end(i)] if i else self.blob[1 : self.end(0)]

    def extend(self, datas: Sequence[bytes], h: ListHash) -> None:
        """Record an append (O(new items)); folded into ``blob`` on the next diff."""
        self.pending.extend(map(compact, datas))  # kept until the next diff: not in orjson's buffers
        self.pending_bytes += sum(map(len, datas))
        self.n += len(datas)
        self.hash = h

    def _fold(self) -> None:
        if not self.pending:
            return
        body = self.blob[:-1]
        start = len(body) + (1 if self.n > len(self.pending) else 0)
        self.ends.extend(_ends_of(self.pending, start))
        self.blob = body + (b"," if len(body) > 1 else b"") + b",".join(self.pending) + b"]"
        self.pending = []
        self.pending_bytes = 0

    def diff(self, blob: bytes, values: Sequence, encode_items: Encoder) -> Optional[tuple[Plan, "Snapshot"]]:
        """Plan the writes that turn this snapshot into ``values`` (whose JSON is ``blob``).

        ``encode_items(values_slice, start)`` encodes the changed suffix only. Returns the
        plan and the snapshot after the write, or None: use the cold path.
        """
        self._fold()
        old, n, m = self.blob, self.n, len(values)
        if blob == old:
            return Plan(kind="unchanged"), self
        k = self._first_change(blob)
        if k is None:
            return None
        start = self.end(k - 1) + 1 if k else 1
        suffix = encode_items(values[k:], k)
        new_ends = _ends_of(suffix, start)
        if (new_ends[-1] if new_ends else 1) != len(blob) - 1:
            return None  # not the layout we assumed
        plan = Plan()
        dig = self.dig.digest
        dg = plan.digests
        total = 0 if k == 0 else self.hash.total
        for i, d in enumerate(suffix, k):
            if i < n and d == self.item(i):
                if k == 0:
                    total += dig(i, d)
                continue
            dg[i] = dig(i, d)
            if i < n and k:
                total -= dig(i, self.item(i))
            total += dg[i]
            plan.upserts.append((i, d))
        if k:
            for i in range(m, n):
                total -= dig(i, self.item(i))
        if m < n:
            plan.delete_from = m
        base = self.base  # k >= base: _first_change said so
        ends = self.ends[: k - base] + new_ends

        def end_of(i: int) -> int:
            return self.first_end if i == base - 1 else ends[i - base]

        last = m - 1
        last_digest = 0
        if m:
            last_digest = dg[last] if last in dg else dig(last, blob[(end_of(last - 1) + 1 if last else 1) : end_of(last)])
        keep = k >= self.hash.p and self.hash.v == HASH_VERSION
        plan.new_hash, hasher = _checkpoint(self.dig, blob, m, end_of, total, last_digest,
                                            self.hasher if keep else None, 1 + self.hash.plen)
        plan.kind = _kind(k, n, m)
        return plan, Snapshot(blob, m, base, self.first_end, ends, hasher, plan.new_hash, self.dig)

    def _first_change(self, blob: bytes) -> Optional[int]:
        """Smallest k whose item (with its delimiter) differs; None when it is before ``base``."""
        old, n = memoryview(self.blob), self.n
        if n and self.end(n - 1) < len(blob) and blob[self.end(n - 1)] == 44 and blob.startswith(old[: self.end(n - 1)]):
            return n  # pure append: one memcmp
        if n == 0:
            return 0

        def same_through(i: int) -> bool:  # items 0..i unchanged, delimiter included
            return blob.startswith(old[: self.end(i) + 1])

        if self.base and not same_through(self.base - 1):
            return None
        lo, hi, step = self.base - 1, n - 1, 1  # invariant: items 0..lo unchanged; hi changed or last
        while True:
            probe = hi - step
            if probe <= lo:
                break
            if same_through(probe):
                lo = probe
                break
            hi, step = probe, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if same_through(mid):
                lo = mid
            else:
                hi = mid
        return lo + 1 if lo + 1 < n or not same_through(n - 1) else n


# ---- cold saves ---------------------------------------------------------------------------------


@dataclass
class ColdStart:
    """A cold save whose checkpoint matched: the items after it, encoded, and what follows."""

    stored: ListHash
    tail: list[bytes]  # JSON of new items p..m-1
    tail_digests: list[int]
    hasher: Any  # BLAKE3 of the checkpoint's bytes (the current format's, whatever the stored row's)
    blob: bytes
    m: int
    dig: Digester = PLAIN

    @property
    def p(self) -> int:
        return self.stored.p

    def plan(self, stored_tail: Optional[Sequence[bytes]]) -> Optional[tuple[Plan, Snapshot]]:
        """The plan; ``stored_tail`` (the stored items p..n-1) when :meth:`needs_read`."""
        s, p, m, n = self.stored, self.stored.p, self.m, self.stored.n
        plan = Plan()
        if stored_tail is None:  # the sum says items p..n-1 are unchanged, or there is one
            same = m >= n and sum(self.tail_digests[: n - p]) & _MASK == (s.total - s.psum) & _MASK
            first = n if same else p
            plan.upserts = list(enumerate(self.tail[first - p :], first))
            k = first
        else:
            changed: Optional[int] = None  # the first index that differs
            for i, d in enumerate(self.tail, p):
                if i >= n or stored_tail[i - p] != d:
                    plan.upserts.append((i, d))
                    changed = i if changed is None else changed
            k = min(m, n) if changed is None else changed
        if m < n:
            plan.delete_from = m
        if not plan.upserts and m == n and s.v == HASH_VERSION:
            return Plan(kind="unchanged"), self._snapshot(s)
        total = (s.psum + sum(self.tail_digests)) & _MASK
        L = 1 + s.plen
        ends = _ends_of(self.tail, L + 1 if p else 1)

        def end_of(i: int) -> int:
            return L if i == p - 1 else ends[i - p]

        last = self.tail_digests[-1] if self.tail else 0
        if m - 1 < p:  # the list ends at the checkpoint: re-hash from the start
            return None
        plan.new_hash, hasher = _checkpoint(self.dig, self.blob, m, end_of, total, last, self.hasher, L)
        plan.kind = _kind(k, n, m) if plan.upserts or m != n else "unchanged"  # (a row upgraded only)
        return plan, Snapshot(self.blob, m, p, L if p else 0, ends, hasher, plan.new_hash, self.dig)

    def needs_read(self) -> bool:
        """Whether the stored items after the checkpoint must be read to find the change."""
        s, p = self.stored, self.stored.p
        same = self.m >= s.n and sum(self.tail_digests[: s.n - p]) & _MASK == (s.total - s.psum) & _MASK
        return not same and s.n - p > 1

    def _snapshot(self, h: ListHash) -> Snapshot:
        L = 1 + h.plen
        return Snapshot(self.blob, self.m, h.p, L if h.p else 0, _ends_of(self.tail, L + 1 if h.p else 1),
                        self.hasher, h, self.dig)


def cold_start(blob: bytes, values: Sequence[Any], stored: ListHash, encode_items: Encoder,
               dig: Digester = PLAIN, seen: Optional[Snapshot] = None) -> Optional[ColdStart]:
    """Check the stored checkpoint against ``blob`` with one hash over one byte range.

    Returns None when the first ``p`` items changed (or the checkpoint does not fit): then
    the per-item path is needed. Items after the checkpoint are encoded here.

    ``seen``: this process's snapshot of the list (it saw the list, another worker wrote since).
    When ``blob`` starts with the bytes its hasher covers (:func:`seed_of`), the stored
    checkpoint is checked by extending that state over the bytes after them only: the same
    proof (the hash of the stored prefix equals that of the new one), its first bytes hashed
    earlier by this process, over bytes the ``memcmp`` shows identical. A row of an older
    format is checked with its own hash, and the BLAKE3 state for the upgrade made by a
    second pass over the same bytes (once per list).
    """
    p, m = stored.p, len(values)
    L = 1 + stored.plen
    if p > m or L > len(blob) - 1 or (p and blob[L] not in (44, 93)) or (p and p == m and blob[L] != 93):
        return None
    view = memoryview(blob)
    seed = seed_of(seen, blob, stored, dig) if seen is not None else None
    if seed is not None:
        hasher = seed[0].copy()
        hasher.update(view[seed[1]:L])
    else:
        hasher = dig.prefix(stored.v)
        hasher.update(view[1:L])
    if hasher.copy().digest() != stored.ph:
        return None
    if stored.v != HASH_VERSION:
        hasher = dig.prefix()
        hasher.update(view[1:L])
    tail = encode_items(values[p:], p)
    body = view[(L + 1 if p else 1) : len(blob) - 1]
    if (len(tail) and bytes(body) != b",".join(tail)) or (not tail and len(body)):
        return None
    return ColdStart(stored, tail, dig.digests(tail, p), hasher, blob, m, dig)


def seed_of(seen: Snapshot, blob: bytes, stored: ListHash, dig: Digester) -> Optional[tuple[Any, int]]:
    """What this process already hashed of the stored checkpoint: ``(hasher state, end)`` with
    the state over ``blob[1:end]``, when ``seen`` (a snapshot) is of the stored row's format and
    digest key, its checkpoint does not lie past the stored one, and ``blob`` starts with the
    bytes it covers (one ``memcmp``); else None (hash from the start)."""
    h = seen.hash
    end = 1 + h.plen
    same_key = seen.dig is dig or (seen.dig.key, seen.dig.kid) == (dig.key, dig.kid)  # digesters are cached, not kept
    if (not same_key or h.v != HASH_VERSION or stored.v != HASH_VERSION or not h.p
            or end > 1 + stored.plen or end > len(seen.blob)):
        return None
    return (seen.hasher, end) if blob.startswith(memoryview(seen.blob)[:end]) else None


def plan_on_hint(blob: bytes, values: Sequence[Any], hint: ListHash, encode_items: Encoder,
                 dig: Digester = PLAIN, seen: Optional[Snapshot] = None) -> Optional[tuple[Plan, Snapshot]]:
    """An append planned against a hash row this process read (not the one it wrote): the plan
    and the snapshot after it, when the new list is ``hint``'s items plus new ones at the end
    (checked as :func:`cold_start` does, seeded by ``seen``) and no stored item needs reading;
    else None. The write must still be conditioned on the stored row being ``hint``."""
    start = cold_start(blob, values, hint, encode_items, dig, seen)
    if start is None or start.needs_read():
        return None
    got = start.plan(None)
    if got is None or got[0].kind != "append" or got[0].delete_from is not None or got[0].new_hash is None:
        return None
    return got


def full_snapshot(blob: bytes, datas: Sequence[bytes], item_digests: Sequence[int],
                  dig: Digester = PLAIN) -> tuple[ListHash, Snapshot]:
    """The hash (checkpoint placed) and snapshot of a list encoded item by item."""
    ends = _ends_of(datas, 1)
    m = len(datas)
    h, hasher = _checkpoint(dig, blob, m, lambda i: ends[i], sum(item_digests), item_digests[-1] if m else 0, None, 1)
    return h, Snapshot(blob, m, 0, 0, ends, hasher, h, dig)


def hash_of(datas: Sequence[bytes], dig: Digester = PLAIN) -> ListHash:
    """The hash row (checkpoint placed) of the list whose items' JSON is ``datas``, under
    ``dig``: what a list written whole anew records (a repair, a re-key).

    >>> hash_of([b"1", b"2"]) == full_snapshot(b"[1,2]", [b"1", b"2"], digests([b"1", b"2"]))[0]
    True
    """
    return full_snapshot(b"[" + b",".join(datas) + b"]", datas, dig.digests(datas), dig)[0]


def plan_against_stored(datas: Sequence[bytes], stored: Sequence[bytes]) -> Plan:
    """Plan from the stored items' JSON (cold path after a hash mismatch)."""
    plan = Plan()
    n, m = len(stored), len(datas)
    k = None
    for i, d in enumerate(datas):
        if i >= n or stored[i] != d:
            plan.upserts.append((i, d))
            k = i if k is None else k
    if m < n:
        plan.delete_from = m
    plan.kind = _kind(min(m, n) if k is None else k, n, m)
    return plan


def plan_rewrite(datas: Sequence[bytes]) -> Plan:
    """Drop every item row and write the list whole (the caller sets ``new_hash``)."""
    return Plan(upserts=list(enumerate(datas)), delete_all=True, kind="rewrite" if datas else "clear")


def plan_cold(datas: Sequence[bytes], item_digests: Sequence[int], stored: Optional[ListHash]) -> Optional[Plan]:
    """Per-item plan without a snapshot; None when the stored items must be read to find the
    change. A missing or foreign hash row gives a full rewrite. ``new_hash`` is left to the caller.
    """
    if stored is None:
        return plan_rewrite(datas)
    if stored.n == len(datas) and stored.total == sum(item_digests) & _MASK:
        return Plan(kind="unchanged")
    if stored.n <= len(datas) and (sum(item_digests[: stored.n]) & _MASK) == stored.total:
        return Plan(upserts=list(enumerate(datas[stored.n :], stored.n)), kind="append")
    return None
