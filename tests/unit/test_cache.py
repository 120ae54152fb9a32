"""cache.LRU, the one bounded cache type (pure: no server)."""

from __future__ import annotations

import pytest

from mysql_state.cache import LRU


def test_get_refreshes_recency_so_eviction_is_least_recently_used():
    c = LRU(max_entries=3)
    for k in "abc":
        c.put(("s", k), k)
    assert c.get(("s", "a")) == "a"  # a read: "a" is now the newest
    c.put(("s", "d"), "d")
    assert c.keys() == [("s", "c"), ("s", "a"), ("s", "d")]  # "b" went, not "a" (FIFO would drop "a")
    assert c.get(("s", "b")) is None


def test_bounded_by_bytes_an_oversized_entry_is_not_kept():
    c = LRU(max_bytes=10, size_of=len)
    c.put(("s", "a"), "xxxx")
    c.put(("s", "b"), "yyyy")
    assert c.size == 8
    c.get(("s", "a"))
    c.put(("s", "c"), "zzzz")  # 12 > 10: the least recently used ("b") goes
    assert c.keys() == [("s", "a"), ("s", "c")] and c.size == 8
    c.put(("s", "big"), "w" * 11)
    assert c.get(("s", "big")) is None and c.size == 8
    c.put(("s", "a"), "x" * 9)  # replacing an entry re-counts its size
    assert c.keys() == [("s", "a")] and c.size == 9
    assert LRU(max_bytes=0, size_of=len).put(("s", "a"), "") is None


def test_put_none_and_drop_by_key_session_or_all():
    c = LRU(max_entries=10)
    for sid, k in [("s", "a"), ("s", "b"), ("t", "a")]:
        c.put((sid, k), 1)
    c.put(("s", "a"), None)
    assert ("s", "a") not in c.keys() and len(c) == 2
    c.drop(session="s")
    assert c.keys() == [("t", "a")]
    c.drop(("t", "a"))
    assert len(c) == 0
    c.put(("u", "x"), 1)
    c.drop()
    assert len(c) == 0 and c.size == 0


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="needs a bound"):
        LRU()
    with pytest.raises(ValueError, match="max_entries"):
        LRU(max_entries=-1)
