"""``store.reencrypt()``: rewrite every row that is not under the keyring's current key.

Hash rows first, one list per transaction: under the list's hash row lock (which every list
writer takes), its items are read, decrypted, and the hash row is recomputed with the current
digest key, the items sealed again with the current key (:func:`migrations.relist`); a list
that is not whole (items not ``0..n-1``, or not what its hash row proves: what the doctor
reports) is not rewritten as a list, so its damage stays visible (its rows are sealed again in
place by the next pass, its hash row left). Then every
other value or item row, a batch per transaction, each replaced only if it still holds the text
that was read, so a concurrent write is never undone (it wins, and a later run rewrites it if it
used an old key). The scan is keyset-ordered by primary key, so a run can be interrupted and
started again.

``progress(done, None)`` is called once before the first batch and after each batch (``batch``
lists, then ``batch`` rows, each batch committed): ``done`` is the rows rewritten so far, the
unit of the result, so the last call's ``done`` is what the call returns; there is no total
(counting the rows due would be a scan of its own). A callback that raises stops the run there,
the batches before it committed: run it again to finish.

Re-encryption is maintenance, not a write of the caller's data: every row keeps its version and
its ``updated_at``, and the catalog is not touched, so an idle session stays idle (``prune``
still finds it) and a compare-and-set with a version read before the rotation still succeeds.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

from . import keys, sql
from .crypto import PREFIX, digest_kid
from .errors import MysqlStateWarning, caller_stacklevel
from .listsync import ListHash
from .migrations import Ctx, relist

__all__ = ["reencrypt"]

_START = ("", "", "", "", -1)


def reencrypt(ctx: Ctx, batch: int, progress: Optional[Callable[[int, Optional[int]], None]] = None) -> int:
    """Rewrite what is not under the current key; returns the rows rewritten (0: nothing to do).

    ``ctx`` carries the store's keyring (``seal``, ``plain``, ``current``: see :class:`Ctx`);
    ``progress(rows rewritten so far, None)`` per batch (see the module doc)."""
    current = ctx.current_dk or ""  # "<key id>/list": digests keyed for their list (crypto.LIST_BOUND)
    marker = f'"dk":"{current}"'
    done = 0
    position = _START

    due: list[bool] = []  # whether the list last looked at needed rewriting
    left: list[tuple[str, str]] = []  # lists that needed it but are not whole: left as they are

    def rekeyed(text: Optional[str]) -> bool:  # gone, or already rewritten by a writer
        done_already = text is None or (ListHash.parse(text) or ListHash(0, 0)).dk == current
        due[:] = [not done_already]
        return done_already

    hash_rows = ctx.q(sql.REENCRYPT_HASH_ROWS)
    if progress is not None:
        progress(0, None)
    while True:  # hash rows: one list per transaction
        rows = ctx.run(lambda cur: _scan(cur, hash_rows, position, (marker, batch)),
                       "reencrypt (hash rows)", write=False)
        for sid, hk, _, _ in rows:
            k = hk[: -len(keys.HASH_SUFFIX)]
            due[:] = [False]
            wrote = ctx.run(lambda cur: relist(cur, ctx, sid, k, skip=rekeyed, whole_only=True),
                            f"reencrypt list {k!r}", write=True)
            if not wrote and due[0]:
                left.append((sid, k))
            done += wrote
        if progress is not None:
            progress(done, None)
        if len(rows) < batch:
            break
        position = _position(rows[-1])
    sealed_prefix = f"{PREFIX}{digest_kid(current)}:"
    position = _START
    scan_rows, reseal = ctx.q(sql.REENCRYPT_ROWS), ctx.q(sql.RESEAL_ROW)
    while True:  # values and items: a batch per transaction
        def one_batch(cur: Any) -> tuple[int, list]:
            rows = _scan(cur, scan_rows, position, (len(sealed_prefix), sealed_prefix, batch))
            changed = 0
            for sid, k, i, text in rows:
                new = ctx.seal(sid, k, i, ctx.plain(sid, k, i, text)).decode()
                changed += cur.execute(reseal, (new, sid, k, i, text))
            return changed, rows

        changed, rows = ctx.run(one_batch, "reencrypt (rows)", write=True)
        done += changed
        if progress is not None:
            progress(done, None)
        if len(rows) < batch:
            break
        position = _position(rows[-1])
    if left:
        named = ", ".join(f"{k!r} of {sid!r}" for sid, k in left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        warnings.warn(f"reencrypt left {len(left)} list(s) that are not whole as they are (their rows sealed again in "
                      f"place, their hash rows under the old digest key): {named}. Repair them (doctor(fix=True) where it can; "
                      "else restore them from a backup, or save them again), then reencrypt() again, before the old key "
                      "leaves the keyring", MysqlStateWarning,
                      stacklevel=caller_stacklevel())
    return done


def _scan(cur: Any, statement: str, position: tuple, tail: tuple) -> list:
    sid, _, key, _, index = position
    cur.execute(statement, (sid, sid, key, key, index) + tail)
    return list(cur.fetchall())


def _position(row: tuple) -> tuple:
    sid, key, index = row[0], row[1], row[2]
    return (sid, sid, key, key, index)
