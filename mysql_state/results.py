"""What the store's calls return: versioned reads, list save reports, ``save_many``'s result.

Pure types, no I/O; the engines fill them, the facade hands them out.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

__all__ = ["UNVERSIONED", "VersionedState", "SaveReport", "SavedMany"]

#: ``save_if_version``'s "nothing written", and its "overwrite whatever is there" argument.
UNVERSIONED = -1


class VersionedState(NamedTuple):
    """A value (or a list's items) with its version (0 when absent)."""

    value: Any
    version: int


class SaveReport(NamedTuple):
    """What one list save wrote: ``kind`` (unchanged, append, suffix, shrink, rewrite, clear),
    ``rows_written`` (item rows upserted), the list's ``version`` after the save, the
    ``indexes`` of the item rows written, in order, and ``delete_from``: the first index of the
    rows past the new end that were deleted (None: none)."""

    kind: str
    rows_written: int
    version: int
    indexes: tuple[int, ...] = ()
    delete_from: Optional[int] = None


class SavedMany(dict):
    """What :meth:`MysqlAgentStateStore.save_many` wrote: key -> :class:`SaveReport` for each
    list, and in ``versions`` the new version of every key saved (values and lists)."""

    versions: dict

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.versions = {}
