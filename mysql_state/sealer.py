"""What a row is as stored: sealed (encrypted at rest) or plain, and the digester of its list.

The engines never ask "is there a keyring?": they hold a :class:`Sealer` and call it. The
plain one (no keyring) passes JSON through and refuses sealed rows as a
:class:`DecryptionError`; :class:`KeyringSealer` seals and opens with a
:class:`~mysql_state.crypto.Keyring` (:mod:`mysql_state.crypto`), re-seals rows copied
server-side for their new place, and picks the digester of a hash row by its key id.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import orjson

from . import keys, serde, sql
from .crypto import LIST_BOUND, Keyring, RowCipher, digest_kid, is_sealed, unreadable
from .listsync import PLAIN, Digester, ListHash, hash_of, verify

__all__ = ["Sealer", "KeyringSealer", "sealer_for", "as_bytes"]

Rows = list[tuple[str, int, bytes]]
#: Lists whose digesters a keyring sealer keeps (each ~1 KB): a miss costs ~3 µs.
_BOUND_DIGESTERS = 4096


def as_bytes(texts: Sequence[Any]) -> list[bytes]:
    """Rows' JSON texts (or plaintexts) as UTF-8 bytes, whichever the driver or the cipher gave.

    >>> as_bytes(["[1]", b"2"])
    [b'[1]', b'2']
    """
    return [x.encode("utf-8") if isinstance(x, str) else x for x in texts]


class Sealer:
    """The sealer of a store without a keyring: rows are stored as their JSON."""

    encrypted = False
    keyring: Optional[Keyring] = None
    #: The ``dk`` of the hash rows this sealer writes (None: unkeyed digests).
    current_dk: Optional[str] = None

    def digester_of(self, dk: Optional[str], sid: str, k: str) -> Optional[Digester]:
        """The digester of the hash row keyed ``dk`` of list ``k`` of session ``sid`` (None:
        that key is not in the ring)."""
        return PLAIN if dk is None else None

    def digester_for(self, sid: str, k: str) -> Digester:
        """The digester new hash rows of list ``k`` of session ``sid`` are written with."""
        return PLAIN

    def usable(self, stored: Optional[ListHash], sid: str, k: str) -> tuple[Optional[ListHash], Digester]:
        """A stored hash row of list ``k`` of ``sid`` and the digester it needs; a hash row keyed
        with a key this store lacks counts as missing (the list is then written whole under the
        current key)."""
        if stored is None:
            return None, self.digester_for(sid, k)
        dig = self.digester_of(stored.dk, sid, k)
        return (stored, dig) if dig is not None else (None, self.digester_for(sid, k))

    def seal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        """The stored text of the row at ``(sid, k, index)`` whose JSON is ``data``."""
        return data

    def reseal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        """:meth:`seal` for a row sealed again in its own place (re-encryption, a repair)."""
        return self.seal(sid, k, index, data)

    def seal_rows(self, sid: str, rows: Rows) -> Rows:
        """Rows ``(key, index, json)`` as stored: values and items sealed, hash rows as they are."""
        return rows

    def open(self, sid: str, k: str, index: int, text: Any) -> bytes:
        """A stored row's plaintext JSON; a sealed row without a keyring is a DecryptionError."""
        if is_sealed(text):
            raise unreadable(sid, k, index, text)
        return text.encode("utf-8") if isinstance(text, str) else text

    def decode(self, sid: str, k: str, index: int, text: Any, model: Any = None) -> Any:
        """A stored row's value (an instance of ``model`` when given); a bad row raises naming it."""
        return serde.decode_row(self.open(sid, k, index, text), model, sid, k, index, self.encrypted)

    def decode_items(self, sid: str, k: str, rows: Sequence[Any], col: int, first: int, model: Any) -> list:
        """The values of list rows (their text in column ``col``, indexes from ``first``); a bad
        row raises naming it. One loop over the rows, no call per row beyond the JSON parser."""
        try:
            if model is None:
                loads = orjson.loads
                return [loads(r[col]) for r in rows]
            decode = serde.decode_row
            return [decode(r[col], model, sid, k, i) for i, r in enumerate(rows, first)]
        except ValueError:
            self.name_bad_row(sid, k, rows, col, first)
            raise

    def plaintexts(self, sid: str, k: str, texts: Sequence[Any], first: int) -> Sequence[Any]:
        """The plaintext JSON of list rows that were decoded (their texts, indexes from
        ``first``): for a read to keep (``list_read.Known``). Plain rows are their JSON."""
        return texts

    def kept_blob(self, texts: Sequence[Any], items: list) -> bytes:
        """One JSON array of a list's items, for a whole read to keep (``list_read.Known``),
        from their stored ``texts`` and the ``items`` decoded from them: plain rows are their
        JSON, joined (exact and cheaper than encoding the items again)."""
        try:
            return ("[" + ",".join(texts) + "]").encode("utf-8")
        except TypeError:  # a driver that gives bytes
            return b"[" + b",".join(as_bytes(texts)) + b"]"

    def name_bad_row(self, sid: str, k: str, rows: Sequence[Any], col: int, first: int) -> None:
        """Raise the typed error of the first unreadable row (JSON, or a sealed row)."""
        for i, r in enumerate(rows, first):
            self.decode(sid, k, i, r[col])

    def stored_size(self, data: bytes) -> int:
        """The bytes ``data`` takes in a statement once stored (sealed and escaped)."""
        return sql.escaped_size(data)

    def reseal_copied(self, cur: Any, statements: dict, from_sid: str, to_sid: str, key: Optional[str],
                      first: int, shift: int) -> None:
        """Seal rows copied server-side (a fork, an archive) again for their new place: the row
        at ``(to_sid, k, i)`` was sealed for ``(from_sid, k, i + shift)``. Plain rows need nothing."""


class KeyringSealer(Sealer):
    """Seals values and items with AES-256-GCM bound to their place (:mod:`mysql_state.crypto`)."""

    encrypted = True
    keyring: Keyring  # always one (the base class's is None)

    def __init__(self, keyring: Keyring, table_name: str) -> None:
        self.keyring = keyring
        self.table_name = table_name
        self.cipher = RowCipher(keyring, table_name)
        self.current_dk = keyring.current + LIST_BOUND
        self._table_wide: dict[str, Digester] = {}
        # One digester per list (its key is derived for the list's place: ~3 µs); bounded.
        self._bound = functools.lru_cache(maxsize=_BOUND_DIGESTERS)(self._bound_digester)

    def _bound_digester(self, kid: str, sid: str, k: str) -> Digester:
        return Digester(self.keyring.list_digest_key(kid, self.table_name, sid, k), kid + LIST_BOUND)

    def digester_of(self, dk: Optional[str], sid: str, k: str) -> Optional[Digester]:
        if dk is None:
            return PLAIN
        kid = digest_kid(dk)
        if kid not in self.keyring:
            return None
        if dk.endswith(LIST_BOUND):
            return self._bound(kid, sid, k)
        found = self._table_wide.get(kid)  # a hash row written before digests were bound to a list
        if found is None:
            found = self._table_wide[kid] = Digester(self.keyring.digest_key(kid), kid)
        return found

    def digester_for(self, sid: str, k: str) -> Digester:
        return self._bound(self.keyring.current, sid, k)

    def seal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        return self.cipher.seal(sid, k, index, data)

    def reseal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        return self.cipher.reseal(sid, k, index, data)

    def seal_rows(self, sid: str, rows: Rows) -> Rows:
        seal, suffix = self.cipher.seal, keys.HASH_SUFFIX
        return [(k, i, d if k.endswith(suffix) else seal(sid, k, i, d)) for k, i, d in rows]

    def open(self, sid: str, k: str, index: int, text: Any) -> bytes:
        return self.cipher.open(sid, k, index, text)

    def usable(self, stored: Optional[ListHash], sid: str, k: str) -> tuple[Optional[ListHash], Digester]:
        # A hash row with unkeyed digests (written before encryption was turned on) counts as
        # missing for the writes: extending it would add each sealed item's unkeyed digest,
        # which a guess can be checked against. The next write rewrites it keyed. One keyed for
        # the whole table (before 2026-12-07) is used as it is, every check intact, and extended
        # under its own key: reencrypt() (and a fork's copy) binds it to its list.
        if stored is not None and stored.dk is None:
            return None, self.digester_for(sid, k)
        return super().usable(stored, sid, k)

    def decode_items(self, sid: str, k: str, rows: Sequence[Any], col: int, first: int, model: Any) -> list:
        try:
            items = self.cipher.open_rows(sid, k, rows, col, first, orjson.loads)
            if model is None:
                return items
            return [serde.convert_row(x, model, sid, k, i, True) for i, x in enumerate(items, first)]
        except ValueError:
            self.name_bad_row(sid, k, rows, col, first)
            raise

    def plaintexts(self, sid: str, k: str, texts: Sequence[Any], first: int) -> Sequence[Any]:
        return self.cipher.open_texts(sid, k, [(x,) for x in texts], 0, first)

    def kept_blob(self, texts: Sequence[Any], items: list) -> bytes:
        # The items encoded again: opening every row a second time costs ~3x more (AES-GCM per
        # row). What is kept is only ever decoded (list_read.check_since), so an equal JSON serves.
        return orjson.dumps(items)

    def stored_size(self, data: bytes) -> int:
        return (len(data) + 28) * 4 // 3 + 80  # nonce and tag, base64, the prefix and key id

    def reseal_copied(self, cur: Any, statements: dict, from_sid: str, to_sid: str, key: Optional[str],
                      first: int, shift: int) -> None:
        # Rows cross the network here: under encryption that cannot be avoided (each is bound to its place).
        cur.execute(statements["COPIED_ROWS"], (to_sid, first, key, key))
        suffix = keys.HASH_SUFFIX
        rows = cur.fetchall()
        hash_rows = {r[0][: -len(suffix)]: (r[0], r[2]) for r in rows if r[0].endswith(suffix)}
        plains: dict[str, dict[int, bytes]] = {k: {} for k in hash_rows}  # only lists' items are kept
        for k, i, text in rows:
            if k.endswith(suffix):
                continue
            if not is_sealed(text):  # a row written without encryption
                plain = text.encode("utf-8") if isinstance(text, str) else text
            else:
                plain = self.cipher.open(from_sid, k, i + shift, text)
                cur.execute(statements["RESEAL_AT"], (self.cipher.seal(to_sid, k, i, plain).decode(), to_sid, k, i))
            if k in plains:
                plains[k][i] = plain
        for k, (hk, text) in hash_rows.items():
            rekeyed = self._rekeyed(from_sid, to_sid, k, text, plains[k])
            if rekeyed is not None:
                cur.execute(statements["RESEAL_AT"], (rekeyed.decode(), to_sid, hk, 0))

    def _rekeyed(self, from_sid: str, to_sid: str, k: str, text: Any, items: dict[int, bytes]) -> Optional[bytes]:
        """The hash row of list ``k`` copied to ``to_sid`` (its items' plaintexts ``items`` by
        index), keyed for its new place; None to leave it as copied: unkeyed (it holds in any
        place), keyed with a key the ring lacks, or not proving items ``0..n-1`` (a damaged list
        stays visibly damaged in the copy, as in the source). Rows past ``n`` (strays the doctor
        reports and removes) are left to the doctor, as in the source."""
        stored = ListHash.parse(text)
        if stored is None or stored.dk is None:
            return None
        dig = self.digester_of(stored.dk, from_sid, k)
        datas = [items.get(i) for i in range(stored.n)]
        if dig is None or None in datas or not verify(stored, datas, dig):  # type: ignore[arg-type]
            return None
        return hash_of(datas, self.digester_for(to_sid, k)).to_json()  # type: ignore[arg-type]


PLAIN_SEALER = Sealer()


def sealer_for(keyring: Optional[Keyring], table_name: str) -> Sealer:
    """The sealer of a store: with ``keyring`` rows are encrypted, without it plain."""
    return PLAIN_SEALER if keyring is None else KeyringSealer(keyring, table_name)
