"""What a row is as stored: sealed (encrypted at rest) or plain, and the digester of its list.

The engines never ask "is there a keyring?": they hold a :class:`Sealer` and call it. The
plain one (no keyring) passes JSON through and refuses sealed rows as a
:class:`DecryptionError`; :class:`KeyringSealer` seals and opens with a
:class:`~mysql_state.crypto.Keyring` (:mod:`mysql_state.crypto`), re-seals rows copied
server-side for their new place, and picks the digester of a hash row by its key id.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import orjson

from . import keys, serde, sql
from .crypto import Keyring, RowCipher, is_sealed, unreadable
from .listsync import PLAIN, Digester, ListHash

__all__ = ["Sealer", "KeyringSealer", "sealer_for", "as_bytes"]

Rows = list[tuple[str, int, bytes]]


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
    #: The digester new hash rows are written with.
    digester: Digester = PLAIN

    def digester_of(self, kid: Optional[str]) -> Optional[Digester]:
        """The digester of hash rows keyed with ``kid`` (None: that key is not in the ring)."""
        return PLAIN if kid is None else None

    def usable(self, stored: Optional[ListHash]) -> tuple[Optional[ListHash], Digester]:
        """A stored hash row and the digester it needs; a hash row keyed with a key this store
        lacks counts as missing (the list is then written whole under the current key)."""
        if stored is None:
            return None, self.digester
        dig = self.digester_of(stored.dk)
        return (stored, dig) if dig is not None else (None, self.digester)

    def seal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        """The stored text of the row at ``(sid, k, index)`` whose JSON is ``data``."""
        return data

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
        return serde.decode_row(self.open(sid, k, index, text), model, sid, k, index)

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

    def __init__(self, keyring: Keyring, table_name: str) -> None:
        self.keyring = keyring
        self.cipher = RowCipher(keyring, table_name)
        self._digesters: dict[Optional[str], Digester] = {None: PLAIN}
        self.digester = self.digester_of(keyring.current)  # type: ignore[assignment]

    def digester_of(self, kid: Optional[str]) -> Optional[Digester]:
        found = self._digesters.get(kid)
        if found is None and kid in self.keyring:
            found = self._digesters[kid] = Digester(self.keyring.digest_key(kid), kid)
        return found

    def seal(self, sid: str, k: str, index: int, data: bytes) -> bytes:
        return self.cipher.seal(sid, k, index, data)

    def seal_rows(self, sid: str, rows: Rows) -> Rows:
        seal, suffix = self.cipher.seal, keys.HASH_SUFFIX
        return [(k, i, d if k.endswith(suffix) else seal(sid, k, i, d)) for k, i, d in rows]

    def open(self, sid: str, k: str, index: int, text: Any) -> bytes:
        return self.cipher.open(sid, k, index, text)

    def usable(self, stored: Optional[ListHash]) -> tuple[Optional[ListHash], Digester]:
        # A hash row with unkeyed digests (written before encryption was turned on) counts as
        # missing for the writes: extending it would add each sealed item's unkeyed digest,
        # which a guess can be checked against. The next write rewrites it keyed.
        if stored is not None and stored.dk is None:
            return None, self.digester
        return super().usable(stored)

    def decode_items(self, sid: str, k: str, rows: Sequence[Any], col: int, first: int, model: Any) -> list:
        try:
            items = self.cipher.open_rows(sid, k, rows, col, first, orjson.loads)
            if model is None:
                return items
            return [serde.convert_row(x, model, sid, k, i) for i, x in enumerate(items, first)]
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
        for k, i, text in cur.fetchall():
            if not is_sealed(text):
                continue  # hash rows and rows written without encryption
            plain = self.cipher.open(from_sid, k, i + shift, text)
            cur.execute(statements["RESEAL_AT"], (self.cipher.seal(to_sid, k, i, plain).decode(), to_sid, k, i))


PLAIN_SEALER = Sealer()


def sealer_for(keyring: Optional[Keyring], table_name: str) -> Sealer:
    """The sealer of a store: with ``keyring`` rows are encrypted, without it plain."""
    return PLAIN_SEALER if keyring is None else KeyringSealer(keyring, table_name)
