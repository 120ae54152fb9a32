"""Where a LangGraph thread lives in its session: the state keys, and item ranges (pure).

A thread is the session ``(user_id, thread_id)``; inside it every key names its checkpoint
namespace and, where it has one, a checkpoint id, a channel, a version:

==============================  =======  ==================================================
key                             kind     holds
==============================  =======  ==================================================
``ix/<ns>``                     list     one ``[checkpoint_id, parent_id]`` per checkpoint,
                                         sorted by id (the newest last)
``cp/<ns>/<checkpoint_id>``     value    the checkpoint (without its values), its metadata,
                                         its parent, small values inline, list references
``wr/<ns>/<checkpoint_id>``     list     the checkpoint's pending writes, in arrival order
``bl/<ns>/<channel>/<version>`` value    a channel's value at one version (not a list)
``log/<ns>/<channel>/<gen>``    list     the items of a list channel (messages), append-only;
                                         a version is a list of ranges into it
==============================  =======  ==================================================

Each part is percent-encoded: every character but ``A-Z a-z 0-9 . _ -`` becomes ``%XX`` of its
UTF-8 bytes, so a part never holds ``/`` or ``:`` (no key can end in ``:_hash``), any
LangGraph string fits, and keys are ASCII. The root namespace ``""`` is written ``~`` (a
``~`` of a name is always ``%7E``). A key that would pass the store's limit of 255 characters
(249 for a list, whose hash row adds 6) has its longest parts replaced by ``#`` and a
BLAKE2b digest of the part (a ``#`` of a name is always ``%23``); the real names are in the
checkpoint rows, which is where the saver reads them.

>>> checkpoint_key("", "1ef4")
'cp/~/1ef4'
>>> log_key("child:1", "messages", "a1b2")
'log/child%3A1/messages/a1b2'
"""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence

from .. import keys

__all__ = [
    "part",
    "index_key",
    "checkpoint_key",
    "checkpoint_prefix",
    "writes_key",
    "blob_key",
    "log_key",
    "ranges_of",
    "span_of",
    "expand",
    "RECORDS",
    "OWN_VALUES",
]

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ROOT = "~"
_VALUE_MAX = keys.MAX_ID_CHARS
_LIST_MAX = keys.MAX_ID_CHARS - len(keys.HASH_SUFFIX)
#: The prefix of every checkpoint row of a thread (all namespaces).
RECORDS = "cp/"
#: The prefixes of the single values the saver writes (the rest of a session is not its own).
OWN_VALUES = ("cp/", "bl/")


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


def _join(head: str, names: Sequence[str], limit: int) -> str:
    parts = [part(n) for n in names]
    key = "/".join([head, *parts])
    while len(key) > limit:
        i = max(range(len(parts)), key=lambda j: len(parts[j]))
        if parts[i].startswith("#"):
            raise ValueError(f"a LangGraph key cannot be made to fit {limit} characters: {key[:80]}...")
        parts[i] = _digest(parts[i])
        key = "/".join([head, *parts])
    return key


def index_key(ns: str) -> str:
    """The list of a namespace's checkpoints: ``[id, parent]`` items in id order."""
    return _join("ix", [ns], _LIST_MAX)


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    """The row of one checkpoint."""
    return _join("cp", [ns, checkpoint_id], _VALUE_MAX)


def checkpoint_prefix(ns: Optional[str] = None) -> str:
    """The key prefix of a namespace's checkpoint rows (None: of every namespace)."""
    return RECORDS if ns is None else _join("cp", [ns], _VALUE_MAX) + "/"


def writes_key(ns: str, checkpoint_id: str) -> str:
    """The list of one checkpoint's pending writes."""
    return _join("wr", [ns, checkpoint_id], _LIST_MAX)


def blob_key(ns: str, channel: str, version: str) -> str:
    """The row of one channel's value at one version."""
    return _join("bl", [ns, channel, str(version)], _VALUE_MAX)


def log_key(ns: str, channel: str, gen: str) -> str:
    """The append-only item log of a list channel (``gen`` tells logs of one channel apart)."""
    return _join("log", [ns, channel, gen], _LIST_MAX)


# ---- a list version as ranges of its log -------------------------------------------------------


def ranges_of(indexes: Sequence[int]) -> list[list[int]]:
    """Log indexes as ``[start, stop)`` ranges, consecutive runs merged.

    >>> ranges_of([0, 1, 2, 7, 8, 3])
    [[0, 3], [7, 9], [3, 4]]
    """
    out: list[list[int]] = []
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
