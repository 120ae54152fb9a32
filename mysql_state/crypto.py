"""Encryption at rest: a keyring, AES-256-GCM rows bound to their place, keyed digests.

Each value and each list item is its own ciphertext, so list saves stay incremental: an
append encrypts only the new items. A row's text is ``"\\x1eenc1:<key id>:<base64(nonce +
ciphertext + tag)>"``; the leading record separator is never the start of JSON, so an
encrypted row is never taken for a value (nor for "no state yet") by a reader without the key.

The associated data binds a row to its place: the table's name, the packed session id, the key
and the item index. A row copied or moved to another table, session, key or index fails to
decrypt. The database's name is left out, so a backup restored under another name reads.

Change detection hashes the plaintext JSON with keys derived from the ring (HMAC-SHA256 of a
ring key and a label), recorded by id in the hash row, so the table holds no digest of the
plaintext that could be matched against guesses. Each list's digest key is bound to its place
(the table, the session, the key: :meth:`Keyring.list_digest_key`), so two lists with the same
items have unrelated hash rows: the table does not tell which lists are equal. Needs the
``encryption`` extra (``cryptography``).

>>> from mysql_state import MysqlAgentStateStore
>>> ring = Keyring({"k1": os.urandom(32)}, current="k1")
>>> with MysqlAgentStateStore.from_url(url, table_name="sealed", create_if_not_exist=True, encryption=ring) as s:
...     s.save("alice", "chat-1", "summary", {"text": "secret"})
...     s.get("alice", "chat-1", "summary")
{'text': 'secret'}
>>> with MysqlAgentStateStore.from_url(url, table_name="sealed") as keyless:  # no ring: a typed error
...     keyless.get("alice", "chat-1", "summary")
Traceback (most recent call last):
    ...
mysql_state.errors.DecryptionError: ...
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from itertools import repeat
from operator import itemgetter
from typing import Any, Callable, Mapping, Optional, Sequence

from .errors import DecryptionError

try:  # SIMD base64 (the encryption extra installs it): 2-3x binascii a row (issue 21)
    from pybase64 import b64decode as _b64decode
except ImportError:  # pragma: no cover - exercised only without pybase64
    # An optional import's stand-in: the same use here (one text in, bytes out), another signature.
    _b64decode = binascii.a2b_base64  # type: ignore[assignment]

__all__ = ["Keyring", "RowCipher", "PREFIX", "is_sealed", "check_place", "LIST_BOUND", "digest_kid"]

PREFIX = "\x1eenc1:"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DIGEST_LABEL = b"mysql-state/digest-key/v1"
_LIST_LABEL = b"mysql-state/list-digest-key/v1\0"
#: What a hash row's ``dk`` ends with when its digests are keyed for its list's place (a key id
#: cannot hold ``/``): ``"k1/list"``. A ``dk`` without it (``"k1"``, written before 2026-12-07)
#: was keyed for the whole table; it is read and extended as it is until ``reencrypt()`` binds it.
LIST_BOUND = "/list"
_NONCE, _SEALED = itemgetter(slice(None, NONCE_BYTES)), itemgetter(slice(NONCE_BYTES, None))


def digest_kid(dk: str) -> str:
    """The ring key id of a hash row's ``dk`` (what a message may show).

    >>> digest_kid("k1/list"), digest_kid("k1")
    ('k1', 'k1')
    """
    return dk[: -len(LIST_BOUND)] if dk.endswith(LIST_BOUND) else dk


def is_sealed(text: Any) -> bool:
    """Whether a stored text is an encrypted row (works for str and bytes).

    >>> row = RowCipher(Keyring({"k1": os.urandom(32)}, current="k1"), "t").seal("alice:c1", "plan", 0, b'{"step": 1}')
    >>> is_sealed(row), is_sealed(row.decode()), is_sealed('{"step": 1}')
    (True, True, False)
    """
    if isinstance(text, bytes):
        return text.startswith(PREFIX.encode())
    return isinstance(text, str) and text.startswith(PREFIX)


def _shown(kid: str) -> str:
    """A key id as a message may show it: quoted when it is short and plainly an id, else only
    its length (a key given where an id goes must not reach a message or a log line)."""
    if len(kid) <= 16 and kid.isprintable() and not any(c in kid for c in "+/=:"):
        return repr(kid)
    return f"({len(kid)} characters, not shown: it may hold a key)"


def _bad_id(n: int, kid: object) -> str:
    """Why key id number ``n`` of a ring is refused (:func:`_shown`)."""
    if not isinstance(kid, str):
        return f"key id {n} must be a str matching {_KEY_ID.pattern}, got {type(kid).__name__}"
    return f"key id {n} {_shown(kid)} must match {_KEY_ID.pattern}"


class Keyring:
    """Key ids to 32-byte AES-256 keys; ``current`` is the one new writes use.

    Older keys stay in the ring to read rows written under them, until
    :meth:`MysqlAgentStateStore.reencrypt` has rewritten those rows. ``repr`` shows ids only.

    ``allow_plaintext=False``: a value or item row that is not encrypted is a
    :class:`~mysql_state.errors.DecryptionError`, as a row under an unknown key is (by default
    it reads as it is: rows written before encryption was turned on). Once ``reencrypt`` (with
    a ring that allows them) has sealed every row, it keeps someone who can write the table but
    has no key from putting plaintext in place of a sealed row.

    >>> old_key, new_key = os.urandom(32), os.urandom(32)
    >>> Keyring({"k2": new_key, "k1": old_key}, current="k2")
    Keyring(ids=['k2', 'k1'], current='k2')
    >>> Keyring({"k2": new_key}, current="k2", allow_plaintext=False)
    Keyring(ids=['k2'], current='k2', allow_plaintext=False)
    """

    def __init__(self, keys: Mapping[str, bytes], current: str, *, allow_plaintext: bool = True) -> None:
        if not isinstance(allow_plaintext, bool):
            raise TypeError(f"allow_plaintext must be True or False, got {type(allow_plaintext).__name__}")
        self.allow_plaintext = allow_plaintext
        if not isinstance(keys, Mapping) or not keys:
            raise ValueError("keys must be a non-empty mapping of key id to a 32-byte key")
        checked: dict[str, bytes] = {}
        for n, (kid, key) in enumerate(keys.items(), 1):
            if not isinstance(kid, str) or not _KEY_ID.fullmatch(kid):
                raise ValueError(_bad_id(n, kid))
            if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
                size = len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__
                raise ValueError(f"key {n} (id {_shown(kid)}) must be {KEY_BYTES} bytes (AES-256), got {size}")
            checked[kid] = bytes(key)
        if current not in checked:
            shown = _shown(current) if isinstance(current, str) else f"({type(current).__name__}, not shown)"
            raise ValueError(f"current key id {shown} is not one of the ring's key ids "
                             f"{[_shown(k) for k in sorted(checked)]}")
        self._keys = checked
        self.current = current
        self._aead: dict[str, Any] = {}
        self._digest_keys = {kid: hmac.new(k, _DIGEST_LABEL, hashlib.sha256).digest() for kid, k in checked.items()}

    @classmethod
    def from_env(cls, name: str = "MYSQL_STATE_KEYS", *, allow_plaintext: bool = True) -> "Keyring":
        """A ring from ``"k2=<base64>,k1=<base64>"`` in the environment; the first is current
        (``allow_plaintext`` as for the constructor).

        >>> Keyring.from_env()  # MYSQL_STATE_KEYS="k2=<base64>,k1=<base64>"
        Keyring(ids=['k2', 'k1'], current='k2')
        """
        spec = os.environ.get(name, "")
        if not spec.strip():
            raise ValueError(f"environment variable {name} is empty or not set (expected \"k2=<base64>,k1=<base64>\")")
        keys: dict[str, bytes] = {}
        order: list[str] = []
        for n, part in enumerate(spec.split(","), 1):
            kid, sep, b64 = part.strip().partition("=")
            if not sep or not kid:
                raise ValueError(f"{name}: entry {n} has no key id and '=' (each entry must be <key id>=<base64 key>, "
                                 "e.g. k1=<base64>; the entry is not shown: it may hold a key)")
            rule = "(each entry is <key id>=<base64 key>, e.g. k1=<base64>)"
            if not _KEY_ID.fullmatch(kid):
                raise ValueError(f"{name}: {_bad_id(n, kid)} {rule}")
            if not b64.strip("="):
                raise ValueError(f"{name}: entry {n} has no key after its id {_shown(kid)} {rule}")
            if kid in keys:  # a dict would keep the last: the ring's current key could change silently
                raise ValueError(f"{name}: key id {_shown(kid)} is given twice (entries {order.index(kid) + 1} "
                                 f"and {n}); each id names one key")
            try:
                keys[kid] = base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"{name}: the key of {_shown(kid)} is not valid base64") from None
            order.append(kid)
        return cls(keys, current=order[0], allow_plaintext=allow_plaintext)

    @property
    def ids(self) -> list[str]:
        """The ring's key ids, in the order given (what ``repr`` shows: never the keys).

        >>> Keyring({"k2": os.urandom(32), "k1": os.urandom(32)}, current="k2").ids
        ['k2', 'k1']
        """
        return list(self._keys)

    def __repr__(self) -> str:
        strict = "" if self.allow_plaintext else ", allow_plaintext=False"
        return f"Keyring(ids={self.ids!r}, current={self.current!r}{strict})"

    def aead(self, kid: str) -> Any:
        """The AES-256-GCM cipher (``cryptography``'s ``AESGCM``) of key ``kid``, made on first
        use and kept: what seals and opens the rows under that key. A ``kid`` not in the ring
        raises ``KeyError``.

        >>> ring = Keyring({"k1": os.urandom(32)}, current="k1")
        >>> aes, nonce = ring.aead("k1"), os.urandom(12)
        >>> aes is ring.aead("k1"), aes.decrypt(nonce, aes.encrypt(nonce, b"hi", b"place"), b"place")
        (True, b'hi')
        """
        found = self._aead.get(kid)
        if found is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            found = self._aead[kid] = AESGCM(self._keys[kid])
        return found

    def digest_key(self, kid: str) -> Optional[bytes]:
        """The change-detection key derived from key ``kid`` (None when not in the ring): a key
        of its own (HMAC-SHA256 of the ring key and a label), so a digest never uses the
        encryption key itself.

        >>> ring = Keyring({"k1": bytes(32)}, current="k1")
        >>> len(ring.digest_key("k1")), ring.digest_key("k1") == bytes(32), ring.digest_key("k9")
        (32, False, None)
        """
        return self._digest_keys.get(kid)

    def list_digest_key(self, kid: str, table: str, session_id: str, key: str) -> Optional[bytes]:
        """The change-detection key of ONE list: :meth:`digest_key` of ``kid`` bound to the
        list's place (HMAC-SHA256 over the table, the packed session id and the key, length
        delimited as JSON, so no two places share one). None when ``kid`` is not in the ring.

        >>> ring = Keyring({"k1": bytes(32)}, current="k1")
        >>> a = ring.list_digest_key("k1", "t", "alice:c1", "memory")
        >>> len(a), a == ring.list_digest_key("k1", "t", "bob:c1", "memory")
        (32, False)
        """
        base = self._digest_keys.get(kid)
        if base is None:
            return None
        return hmac.new(base, _LIST_LABEL + json.dumps([table, session_id, key]).encode("utf-8"),
                        hashlib.sha256).digest()

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys


def check_place(session_id: str, key: str) -> None:
    """ValueError when ``session_id`` or ``key`` holds a NUL: the associated data that binds a
    sealed row to its place separates table, session id, key and index by NUL, so such ids
    could give two places one binding (``("u:c", "a\\0b")`` and ``("u:c\\0a", "b")``), and a
    row sealed for one would open in the other. New rows of an encrypted store are refused
    there, before anything is sealed or sent.

    >>> check_place("u:c", "memory")
    >>> check_place("u:c", "a\\0b")
    Traceback (most recent call last):
    ...
    ValueError: key 'a\\x00b' contains NUL ('\\x00'): an encrypted store binds each row to its place (table, session id, key, index, separated by NUL), so an id with NUL in it could share another place's binding; nothing was written
    """
    if "\0" in session_id or "\0" in key:
        what = f"session id {session_id!r}" if "\0" in session_id else f"key {key!r}"
        raise ValueError(f"{what} contains NUL ('\\x00'): an encrypted store binds each row to its place (table, "
                         "session id, key, index, separated by NUL), so an id with NUL in it could share another "
                         "place's binding; nothing was written")


class RowCipher:
    """Seals and opens rows of one table with a :class:`Keyring`."""

    def __init__(self, keyring: Keyring, table: str) -> None:
        try:
            import cryptography  # noqa: F401
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError("encryption needs the 'encryption' extra: pip install 'mysql-state[encryption]'") from exc
        self.keyring = keyring
        self.table = table

    def _place(self, session_id: str, key: str) -> bytes:
        """The associated data's prefix for the rows of ``(session_id, key)``: the table, the
        session id and the key, each followed by NUL (the item index comes last).

        >>> RowCipher(Keyring({"k1": bytes(32)}, current="k1"), "t")._place("u:s", "memory")
        b't\\x00u:s\\x00memory\\x00'
        """
        return f"{self.table}\0{session_id}\0{key}\0".encode("utf-8")

    def _aad(self, session_id: str, key: str, index: int) -> bytes:
        return self._place(session_id, key) + b"%d" % index

    def seal(self, session_id: str, key: str, index: int, data: bytes) -> bytes:
        """The stored text (ASCII bytes) of a NEW row whose plaintext JSON is ``data``; a place
        whose session id or key holds a NUL is refused (:func:`check_place`)."""
        check_place(session_id, key)
        return self.reseal(session_id, key, index, data)

    def reseal(self, session_id: str, key: str, index: int, data: bytes) -> bytes:
        """:meth:`seal` for a row sealed again in its own place (re-encryption, a repair): no
        place check, so rows an earlier version stored under an id with NUL stay readable and
        rotate to the current key like every other row."""
        kid = self.keyring.current
        nonce = os.urandom(NONCE_BYTES)
        sealed = self.keyring.aead(kid).encrypt(nonce, data, self._aad(session_id, key, index))
        return (PREFIX + kid + ":").encode() + base64.b64encode(nonce + sealed)

    def opener(self, session_id: str, key: str) -> Callable[[int, Any], bytes]:
        """``open`` for the rows of one list, with the associated data's prefix built once and
        the rows sealed under the current key opened without splitting their text (one prefix
        test, base64, decrypt); a row under an older key of the ring opens too; every other row
        (plaintext, an unknown key id, a failure) goes through :meth:`open`, which names it."""
        prefix = self._place(session_id, key)
        ring, plen, nlen, b64 = self.keyring, len(PREFIX), NONCE_BYTES, _b64decode
        current = PREFIX + ring.current + ":"
        clen, decrypt = len(current), ring.aead(ring.current).decrypt

        def open_row(index: int, text: Any) -> bytes:
            if isinstance(text, str) and text.startswith(current):
                try:
                    raw = b64(text[clen:])
                    return decrypt(raw[:nlen], raw[nlen:], prefix + b"%d" % index)
                except Exception:  # noqa: BLE001 - reported with its place below
                    return self.open(session_id, key, index, text)
            if isinstance(text, str) and text.startswith(PREFIX):
                kid, _, body = text[plen:].partition(":")
                if kid in ring:
                    try:
                        raw = b64(body)
                        return ring.aead(kid).decrypt(raw[:nlen], raw[nlen:], prefix + b"%d" % index)
                    except Exception:  # noqa: BLE001 - reported with its place below
                        pass
            return self.open(session_id, key, index, text)  # plaintext rows, and every error

        return open_row

    def open_rows(self, session_id: str, key: str, rows: Sequence[Any], col: int, first: int,
                  loads: Callable[[bytes], Any]) -> list:
        """``[loads(plaintext)]`` of the rows of one list (a row's text in column ``col``, item
        indexes from ``first``). When every row is sealed under the current key (the common
        case) they are opened in C-level passes (``map``: no Python frame per row; issue 21,
        encrypted reads); otherwise, or when any row fails to open there, row by row through
        :meth:`opener`, which opens rows under older keys and plaintext rows and raises the
        :class:`DecryptionError` of :meth:`open` naming the first row that does not open. A
        row that opened is authentic for its place (AES-GCM with the place as associated data),
        so the fast passes can never return what the row-by-row one would not."""
        return list(map(loads, self.open_texts(session_id, key, rows, col, first)))

    def open_texts(self, session_id: str, key: str, rows: Sequence[Any], col: int, first: int) -> list[bytes]:
        """The plaintext JSON of the rows of one list, as :meth:`open_rows` opens them."""
        texts = list(map(itemgetter(col), rows))
        current = PREFIX + self.keyring.current + ":"
        prefix = self._place(session_id, key)
        plains: Optional[list] = None
        try:
            if all(map(str.startswith, texts, repeat(current))):  # TypeError for a text that is not str
                raws = list(map(_b64decode, map(itemgetter(slice(len(current), None)), texts)))
                aads = [prefix + b"%d" % i for i in range(first, first + len(raws))]
                plains = list(map(self.keyring.aead(self.keyring.current).decrypt,
                                  map(_NONCE, raws), map(_SEALED, raws), aads))
        except Exception:  # noqa: BLE001 - the row-by-row pass below names the row
            plains = None
        if plains is None:
            opened = self.opener(session_id, key)
            plains = [opened(i, text) for i, text in enumerate(texts, first)]
        return plains

    def open(self, session_id: str, key: str, index: int, text: Any) -> bytes:
        """The plaintext JSON of a stored row (a row that is not sealed is returned as is)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not text.startswith(PREFIX):
            if not self.keyring.allow_plaintext:
                raise _failed(session_id, key, index, None, "it is not encrypted, and this store's keyring refuses "
                                                            "plaintext rows (allow_plaintext=False): written before "
                                                            "encryption was turned on (reencrypt() with a ring that "
                                                            "allows them seals it), or put there without the key")
            return text.encode("utf-8")
        kid, _, body = text[len(PREFIX):].partition(":")
        if kid not in self.keyring:
            raise _failed(session_id, key, index, kid, "its key id is not in this store's keyring")
        try:
            raw = base64.b64decode(body, validate=True)
            return self.keyring.aead(kid).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                                  self._aad(session_id, key, index))
        except Exception:  # noqa: BLE001 - InvalidTag, bad base64, short input: all "cannot decrypt"
            raise _failed(session_id, key, index, kid,
                          "it was changed, or moved from another table, session, key or index") from None


def well_formed(text: Any) -> bool:
    """Whether a sealed row's text has the envelope's form (key id, base64 of nonce, ciphertext
    and tag): what can be checked without the key (the doctor of a store without a keyring)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.startswith(PREFIX):
        return False
    kid, sep, body = text[len(PREFIX):].partition(":")
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(sep) and _KEY_ID.fullmatch(kid) is not None and len(raw) >= NONCE_BYTES + 16


def key_id_of(text: Any) -> Optional[str]:
    """The key id of a sealed row's text (None for a plaintext row)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.startswith(PREFIX):
        return None
    return text[len(PREFIX):].partition(":")[0]


def unreadable(session_id: str, key: str, index: int, text: Any) -> DecryptionError:
    """The error for a sealed row met by a store without a keyring."""
    return _failed(session_id, key, index, key_id_of(text), "this store has no keyring (encryption=...)")


def _failed(session_id: str, key: str, index: int, kid: Optional[str], why: str) -> DecryptionError:
    return DecryptionError(
        f"the row of session {session_id!r}, key {key!r}, item_index {index} is encrypted under key id "
        f"{kid!r} and cannot be decrypted: {why}",
        session_id, key, index, kid,
    )
