"""One bounded cache type: a thread-safe, true LRU. Pure, no I/O.

The store keeps two per-process memories of lists, both an :class:`LRU` keyed by
``(packed session id, key)``: the list snapshots that make a warm ``save_list`` cheap
(bounded by bytes: ``snapshot_bytes``), and the hash row last seen per list, a hint that
makes ``append_list`` one statement (bounded by entries). Neither is ever trusted blindly:
whoever uses an entry checks it against the stored hash row under its lock, so a dropped or
evicted entry costs a round trip, never a wrong answer.

"True LRU": a :meth:`LRU.get` that finds an entry makes it the most recently used, so the
entries evicted first are the ones least recently read or written.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Optional, TypeVar

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _one(_: object) -> int:
    return 1


class LRU(Generic[K, V]):
    """A least-recently-used cache bounded by entries, by size, or both.

    ``max_entries`` bounds how many entries it holds; ``max_bytes`` bounds the sum of
    ``size_of(value)`` (an entry larger than ``max_bytes`` alone is not kept; ``max_bytes=0``
    keeps nothing). Keys are tuples whose first item is a session id, so that
    :meth:`drop` can forget one session's entries.

    >>> c = LRU(max_entries=2)
    >>> c.put(("s", "a"), 1); c.put(("s", "b"), 2)
    >>> c.get(("s", "a"))  # "a" is now the most recently used
    1
    >>> c.put(("t", "c"), 3)  # evicts "b", the least recently used
    >>> sorted(c.keys())
    [('s', 'a'), ('t', 'c')]
    """

    def __init__(self, *, max_entries: Optional[int] = None, max_bytes: Optional[int] = None,
                 size_of: Optional[Callable[[V], int]] = None) -> None:
        for name, bound in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool) or bound < 0):
                raise ValueError(f"{name} must be an int >= 0 or None, got {bound!r}")
        if max_entries is None and max_bytes is None:
            raise ValueError("an LRU needs a bound: max_entries, max_bytes, or both")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._size_of: Callable[[V], int] = size_of if size_of is not None else _one
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()  # oldest first
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> Optional[V]:
        """The entry at ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: K, value: Optional[V]) -> None:
        """Keep ``value`` at ``key`` as the most recently used, evicting the least recently
        used beyond the bounds; ``None`` forgets ``key``."""
        with self._lock:
            self._pop(key)
            if value is None:
                return
            size = self._size_of(value)
            if self.max_bytes is not None and size > self.max_bytes:
                return
            self._items[key] = (value, size)
            self._total += size
            while self._items and ((self.max_bytes is not None and self._total > self.max_bytes)
                                   or (self.max_entries is not None and len(self._items) > self.max_entries)):
                self._pop(next(iter(self._items)))

    def drop(self, key: Optional[K] = None, session: Optional[str] = None) -> None:
        """Forget one entry (``key``), every entry of a session (``session``: keys whose first
        item it is), or (no arguments) everything."""
        with self._lock:
            if key is not None:
                self._pop(key)
            elif session is not None:
                for k in [k for k in self._items if k[0] == session]:  # type: ignore[index]
                    self._pop(k)
            else:
                self._items.clear()
                self._total = 0

    def keys(self) -> list[K]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._items)

    @property
    def size(self) -> int:
        """The sum of the sizes of the entries held (their count without ``size_of``)."""
        return self._total

    def __len__(self) -> int:
        return len(self._items)

    def _pop(self, key: K) -> None:
        found = self._items.pop(key, None)
        if found is not None:
            self._total -= found[1]
