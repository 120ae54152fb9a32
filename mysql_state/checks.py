"""Checks of the options and counts the public calls take, before any connection or SQL: each
error names the option and the rule. Pure (no I/O), on the lowest floor, so that the pool, the
wiring, the catalog and the facade check their numbers by one rule each.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_COUNT", "check_count", "check_int", "check_seconds"]


#: The largest page size or batch the store accepts: it goes into a LIMIT (which takes at most
#: 2**64 - 1, and a page asks for one row more), so a larger number would be an SQL error.
MAX_COUNT = 1 << 62


def check_count(name: str, value: Any) -> int:
    """A page size or batch (``limit``, ``batch``): an int from 1 to :data:`MAX_COUNT`; the
    error names the parameter and is raised before any SQL.

    >>> check_count("batch", 500)
    500
    >>> check_count("limit", 0)
    Traceback (most recent call last):
    ...
    ValueError: limit must be between 1 and 4611686018427387904, got 0
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if not 1 <= value <= MAX_COUNT:
        raise ValueError(f"{name} must be between 1 and {MAX_COUNT}, got {value}")
    return value


def check_int(name: str, value: Any, minimum: int) -> int:
    """An option that must be an int of at least ``minimum``; the error names it.

    >>> check_int("snapshot_bytes", 0, 0)
    0
    >>> check_int("retries", -1, 0)
    Traceback (most recent call last):
    ...
    ValueError: retries must be >= 0, got -1
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_seconds(name: str, value: Any) -> float:
    """A positive, finite number of seconds; the error names the option.

    >>> check_seconds("pool_timeout", 2)
    2.0
    >>> check_seconds("timeout", float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: timeout must be a positive, finite number of seconds, got inf
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}: {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)
