"""``store.reencrypt()``: rewrite every row that is not under the keyring's current key.

Hash rows first, one list per transaction: under the list's hash row lock (which every list
writer takes), its items are read, decrypted, and the hash row is recomputed with the current
digest key, the items sealed again with the current key. Then every other value or item row,
a batch per transaction, each replaced only if it still holds the text that was read, so a
concurrent write is never undone (it wins, and a later run rewrites it if it used an old key).
The scan is keyset-ordered by primary key, so a run can be interrupted and started again.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import keys, listsync
from .crypto import PREFIX

__all__ = ["reencrypt"]

_START = ("", "", "", "", -1)


def reencrypt(store: Any, batch: int, progress: Optional[Callable[[int], None]] = None) -> int:
    """Rewrite what is not under the current key; returns the rows rewritten (0: nothing to do)."""
    ring = store._keyring
    current = store._dig.kid
    marker = f'"dk":"{current}"'
    done = 0
    position = _START
    while True:  # hash rows: one list per transaction
        rows = store._db.run(lambda cur: _scan(cur, store._sql["REENCRYPT_HASH_ROWS"], position, (marker, batch)),
                             "reencrypt (hash rows)", write=False)
        for sid, hk, _, _ in rows:
            k = hk[: -len(keys.HASH_SUFFIX)]
            done += store._db.run(lambda cur: _rekey_list(store, cur, sid, k), f"reencrypt list {k!r}", write=True)
            store._forget((sid, k))
        if progress:
            progress(done)
        if len(rows) < batch:
            break
        position = _position(rows[-1])
    sealed_prefix = f"{PREFIX}{ring.current}:"
    position = _START
    while True:  # values and items: a batch per transaction
        def one_batch(cur: Any) -> tuple[int, list]:
            rows = _scan(cur, store._sql["REENCRYPT_ROWS"], position, (len(sealed_prefix), sealed_prefix, batch))
            changed = 0
            for sid, k, i, text in rows:
                new = store._cipher.seal(sid, k, i, store._plain(sid, k, i, text)).decode()
                changed += cur.execute(store._sql["RESEAL_ROW"], (new, sid, k, i, text))
            return changed, rows

        changed, rows = store._db.run(one_batch, "reencrypt (rows)", write=True)
        done += changed
        if progress:
            progress(done)
        if len(rows) < batch:
            break
        position = _position(rows[-1])
    return done


def _scan(cur: Any, statement: str, position: tuple, tail: tuple) -> list:
    sid, _, key, _, index = position
    cur.execute(statement, (sid, sid, key, key, index) + tail)
    return list(cur.fetchall())


def _position(row: tuple) -> tuple:
    sid, key, index = row[0], row[1], row[2]
    return (sid, sid, key, key, index)


def _rekey_list(store: Any, cur: Any, sid: str, k: str) -> int:
    """Recompute one list's hash row under the current digest key and re-seal its items."""
    hk = keys.hash_key(k)
    cur.execute(store._sql["LOCK_HASH_ROW"], (sid, hk))
    row = cur.fetchone()
    if row is None or (listsync.ListHash.parse(row[0]) or listsync.ListHash(0, 0)).dk == store._dig.kid:
        return 0  # gone, or already rewritten by a writer
    cur.execute(store._sql["LOCK_ITEMS"], (sid, k))
    have = cur.fetchall()
    datas = [store._plain(sid, k, r[0], r[1]) for r in have]
    if [r[0] for r in have] != list(range(len(have))):
        cur.execute(store._sql["DELETE_ITEMS_FROM"], (sid, k, 0))  # renumber 0..n-1
    blob = b"[" + b",".join(datas) + b"]"
    dig = store._dig
    new_hash, _ = listsync.full_snapshot(blob, datas, dig.digests(datas), dig)
    store._write_list(cur, sid, k, list(enumerate(datas)), new_hash, with_hash=True)
    return 1 + len(datas)
