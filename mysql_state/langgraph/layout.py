"""Where a LangGraph thread lives in its session: the state keys, and item ranges (pure).

A thread is the session ``(user_id, thread_id)``; inside it every key names its checkpoint
namespace and, where it has one, a checkpoint id, a channel, a version:

==============================  =======  ==================================================
key                             kind     holds
==============================  =======  ==================================================
``ix/<ns>``                     list     one ``[checkpoint_id, parent_id, position]`` per
                                         checkpoint (``[checkpoint_id, parent_id]`` before
                                         2026-12-07), sorted by id (the newest last)
``cp/<ns>/<checkpoint_id>``     value    the checkpoint (without its values), its metadata,
                                         its parent, small values inline, list references
``wr/<ns>/<id>/<task>/<seq>``   value    one ``put_writes`` call: a task's writes
``bl/<ns>/<channel>/<version>`` value    a channel's value at one version (not a list)
``log/<ns>/<channel>/<gen>``    list     the items of a list channel (messages), append-only;
                                         a version is a list of ranges into it
==============================  =======  ==================================================

Each part is percent-encoded: every character but ``A-Z a-z 0-9 . _ -`` becomes ``%XX`` of its
UTF-8 bytes, so a part never holds ``/`` or ``:`` (no key can end in ``:_hash``), any
LangGraph string fits, and keys are ASCII. The root namespace ``""`` is written ``~`` (a
``~`` of a name is always ``%7E``). So that every key fits the store's limit of 255
characters (249 for a list, whose hash row adds 6), a part longer than its budget
(namespace 120, checkpoint or task id 54, channel or version 60) is written ``#`` and a
BLAKE2b digest of it (a ``#`` of a name is always ``%23``); the real names are in the rows,
which is where the saver reads them.

>>> checkpoint_key("", "1ef4")
'cp/~/1ef4'
>>> log_key("child:1", "messages", "a1b2")
'log/child%3A1/messages/a1b2'
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional, Sequence, Union

from .. import keys

__all__ = [
    "part",
    "index_key",
    "checkpoint_key",
    "checkpoint_prefix",
    "writes_key",
    "special_write_key",
    "writes_prefix",
    "blob_key",
    "log_key",
    "ranges_of",
    "span_of",
    "expand",
    "record_fault",
    "entry_fault",
    "writes_fault",
    "RECORDS",
    "OWN_VALUES",
]

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ROOT = "~"
# Budgets per part, so that every key fits the store's 255 characters (249 for a list key):
# wr/<ns 120>/<id 54>/<task 54>/<seq 20> is the longest, 254.
_NS_CHARS, _ID_CHARS, _NAME_CHARS = 120, 54, 60
assert 3 + _NS_CHARS + 1 + 2 * (_ID_CHARS + 1) + 20 <= keys.MAX_ID_CHARS
assert 4 + _NS_CHARS + 1 + _NAME_CHARS + 1 + 16 <= keys.MAX_ID_CHARS - len(keys.HASH_SUFFIX)
#: The prefix of every checkpoint row of a thread (all namespaces).
RECORDS = "cp/"
#: The prefixes of the single values the saver writes (the rest of a session is not its own).
OWN_VALUES = ("cp/", "bl/", "wr/")


#: The store session of the saver's user that :class:`~mysql_state.langgraph.MysqlStore` keeps
#: its long-term memory in: no thread may take it.
MEMORY_SESSION = "langgraph-store"


def thread_of(thread_id: object) -> str:
    """The store session of a LangGraph thread: ``str(thread_id)``, refusing the memory's.

    >>> thread_of(7)
    '7'
    """
    thread = str(thread_id)
    if thread == MEMORY_SESSION:
        raise ValueError(f"thread_id {thread!r} is reserved: MysqlStore keeps the user's long-term memory "
                         "in that session of the store; use another thread id")
    return thread


def part(name: str) -> str:
    """One key part: ``name`` percent-encoded (``~`` for ``""``).

    >>> part("a/b:c é"), part("")
    ('a%2Fb%3Ac%20%C3%A9', '~')
    """
    if not isinstance(name, str):
        raise TypeError(f"a LangGraph name must be a str, got {type(name).__name__}: {name!r}")
    if name == "":
        return _ROOT
    if all(c in _SAFE for c in name):
        return name
    try:
        return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in name)
    except UnicodeEncodeError:
        raise ValueError(f"the LangGraph name {name[:60]!r} is not valid Unicode text (a lone surrogate)") from None


def _digest(encoded: str) -> str:
    return "#" + hashlib.blake2b(encoded.encode("ascii"), digest_size=12).hexdigest()


def _fit(name: str, limit: int) -> str:
    """A part of at most ``limit`` characters: encoded, or ``#`` and a digest when longer.
    Each part is fitted on its own, so a prefix (namespace, checkpoint) is the same in every
    key that starts with it."""
    p = part(name)
    return p if len(p) <= limit else _digest(p)


def _ns(ns: str) -> str:
    return _fit(ns, _NS_CHARS)


def index_key(ns: str) -> str:
    """The list of a namespace's checkpoints: ``[id, parent]`` items in id order."""
    return f"ix/{_ns(ns)}"


def checkpoint_prefix(ns: Optional[str] = None) -> str:
    """The key prefix of a namespace's checkpoint rows (None: of every namespace)."""
    return RECORDS if ns is None else f"cp/{_ns(ns)}/"


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    """The row of one checkpoint."""
    return checkpoint_prefix(ns) + _fit(checkpoint_id, _ID_CHARS)


def writes_prefix(ns: str, checkpoint_id: Optional[str] = None) -> str:
    """The key prefix of one checkpoint's pending writes (None: of a namespace's)."""
    head = f"wr/{_ns(ns)}/"
    return head if checkpoint_id is None else head + _fit(checkpoint_id, _ID_CHARS) + "/"


def writes_key(ns: str, checkpoint_id: str, task_id: str, seq: int) -> str:
    """The row of one ``put_writes`` call: a task's writes; ``seq`` orders a task's calls."""
    return writes_prefix(ns, checkpoint_id) + f"{_fit(task_id, _ID_CHARS)}/{seq:020d}"


def special_write_key(ns: str, checkpoint_id: str, task_id: str, index: int) -> str:
    """The row of a task's special write (``index`` < 0: an interrupt, a resume, an error),
    written over by each call that makes one: the last one committed is the one read, whatever
    the clocks of the processes that wrote them (after every :func:`writes_key` of the task)."""
    return writes_prefix(ns, checkpoint_id) + f"{_fit(task_id, _ID_CHARS)}/x{-index:03d}"


def blob_key(ns: str, channel: str, version: Union[str, int, float]) -> str:
    """The row of one channel's value at one version."""
    return f"bl/{_ns(ns)}/{_fit(channel, _NAME_CHARS)}/{_fit(str(version), _NAME_CHARS)}"


def log_key(ns: str, channel: str, gen: str) -> str:
    """The append-only item log of a list channel (``gen`` tells logs of one channel apart)."""
    return f"log/{_ns(ns)}/{_fit(channel, _NAME_CHARS)}/{_fit(gen, 16)}"


# ---- a list version as ranges of its log -------------------------------------------------------


def ranges_of(indexes: Sequence[int], head: Sequence[Sequence[int]] = ()) -> list[list[int]]:
    """Log indexes as ``[start, stop)`` ranges, consecutive runs merged; after the ranges
    ``head`` (copied, not changed: a version that extends another).

    >>> ranges_of([0, 1, 2, 7, 8, 3])
    [[0, 3], [7, 9], [3, 4]]
    >>> ranges_of([5, 6], head=[[0, 5]])
    [[0, 7]]
    """
    out: list[list[int]] = [[lo, hi] for lo, hi in head]
    for i in indexes:
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


def span_of(ranges: Sequence[Sequence[int]]) -> tuple[int, int]:
    """``(lo, hi)``: the window of the log the ranges read (``(0, 0)`` for none)."""
    if not ranges:
        return 0, 0
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def expand(ranges: Sequence[Sequence[int]]) -> list[int]:
    """The log indexes of ranges, in order.

    >>> expand([[0, 2], [5, 6]])
    [0, 1, 5]
    """
    return [i for lo, hi in ranges for i in range(lo, hi)]


def _is_int(x: Any) -> bool:
    return type(x) is int


def record_fault(key: str, record: Any) -> Optional[str]:
    """What is wrong with the checkpoint row stored at ``key`` (None: nothing), checked before
    any field is used, so that a row changed by hand is a typed error naming it, never a
    ``KeyError`` deep in the saver nor a wrong answer: a dict whose ``ns`` and ``id`` name
    ``key`` itself, its parent an id or None, its ``checkpoint`` and ``metadata`` rows there,
    ``values`` and ``blobs`` maps of channels, and each of its ``lists`` a log generation
    ``g``, a length ``n`` and ranges ``r`` of ``[lo, hi]`` with ``0 <= lo <= hi``.

    >>> row = {"ns": "", "id": "1", "parent": None, "checkpoint": {}, "metadata": {},
    ...        "lists": {"messages": {"g": "ab", "r": [[0, 2]], "n": 2}}}
    >>> record_fault(checkpoint_key("", "1"), row) is None
    True
    >>> record_fault(checkpoint_key("", "2"), row)
    "its ns and id ('', '1') are not those of its key"
    >>> record_fault(checkpoint_key("", "1"), {**row, "lists": {"messages": {"g": "ab", "r": [[-2, 0]], "n": 2}}})
    "list 'messages' has a range that is not [lo, hi] with 0 <= lo <= hi: [-2, 0]"
    """
    if not isinstance(record, dict):
        return "not a checkpoint row"
    ns, cid = record.get("ns"), record.get("id")
    if not isinstance(ns, str) or not isinstance(cid, str):
        return "its ns or id is missing or not a string"
    if checkpoint_key(ns, cid) != key:
        return f"its ns and id {(ns, cid)!r} are not those of its key"
    parent = record.get("parent")
    if parent is not None and not isinstance(parent, str):
        return f"its parent is not an id: {parent!r}"
    if "checkpoint" not in record or "metadata" not in record:
        return "its checkpoint or metadata is missing"
    for field in ("values", "blobs", "lists"):
        if not isinstance(record.get(field, {}), dict):
            return f"its {field} is not a map of channels"
    for ch, ref in record.get("lists", {}).items():
        if not isinstance(ref, dict) or not isinstance(ref.get("g"), str) or not _is_int(ref.get("n")) \
                or ref["n"] < 0 or not isinstance(ref.get("r"), list):
            return f"list {ch!r} is not a log reference (g, n, r): {ref!r}"
        for r in ref["r"]:
            if not isinstance(r, list) or len(r) != 2 or not all(map(_is_int, r)) or not 0 <= r[0] <= r[1]:
                return f"list {ch!r} has a range that is not [lo, hi] with 0 <= lo <= hi: {r!r}"
    return None


def entry_fault(entry: Any) -> Optional[str]:
    """What is wrong with an item of a namespace's index (None: nothing): ``[id, parent, ...]``
    with ``id`` a string and ``parent`` an id or None.

    >>> entry_fault(["2", "1", 12]), entry_fault([12345, None, 12])
    (None, 'not [id, parent, ...] with a string id: [12345, None, 12]')
    """
    if not isinstance(entry, list) or len(entry) < 2 or not isinstance(entry[0], str) \
            or not (entry[1] is None or isinstance(entry[1], str)):
        return f"not [id, parent, ...] with a string id: {entry!r}"
    return None


def writes_fault(row: Any) -> Optional[str]:
    """What is wrong with a row of pending writes (None: nothing): a dict with the checkpoint
    id ``cp``, the ``task`` and writes ``w``, each ``{"i": int, "ch": str, "v": row}``.

    >>> writes_fault({"cp": "1", "task": "t", "w": [{"i": 0, "ch": "messages", "v": {}}]}) is None
    True
    >>> writes_fault({"cp": "1", "w": []})
    'not a row of pending writes (cp, task, w)'
    """
    if not isinstance(row, dict) or not isinstance(row.get("cp"), str) or not isinstance(row.get("task"), str) \
            or not isinstance(row.get("w"), list):
        return "not a row of pending writes (cp, task, w)"
    for w in row["w"]:
        if not isinstance(w, dict) or not _is_int(w.get("i")) or not isinstance(w.get("ch"), str) or "v" not in w:
            return f"a write is not {{i, ch, v}}: {str(w)[:80]!r}"
    return None

