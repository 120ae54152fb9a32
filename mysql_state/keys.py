"""Key packing and validation: the only place that decides what an id may be.

``(user_id, session_id)`` is stored in the ``session_id`` column as ``"<user>:<session>"``
(``__anon__`` for anonymous callers), exactly as the Java store does. The rules below make
that packing unambiguous, so no two distinct ``(user, session, key)`` ever share a row.
Every check runs before any SQL is sent.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Optional

DEFAULT_DATABASE = "agentscope"
DEFAULT_TABLE = "agentscope_sessions"
ANONYMOUS = "__anon__"
HASH_SUFFIX = ":_hash"
SEPARATOR = ":"
#: Internal rows use session ids with no ':' (no packed id can equal one): the catalog row of a
#: session is (CATALOG_SESSION, <packed id>, 0); its archived list items live under
#: history_session(<packed id>).
CATALOG_SESSION = "__catalog__"
HISTORY_PREFIX = "__history__"
MAX_ID_CHARS = 255  # VARCHAR(255) counts characters (code points) in utf8mb4
MAX_IDENTIFIER_CHARS = 64
IDENTIFIER_RULE = r"^[a-zA-Z_][a-zA-Z0-9_-]*$"
_IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]*")


def identifier(name: Optional[str], what: str, default: str) -> str:
    """Validate a database or table name; None or blank gives ``default``.

    >>> identifier(None, "table name", "agentscope_sessions")
    'agentscope_sessions'
    >>> identifier("my-db", "database name", "agentscope")
    'my-db'
    """
    if name is None:
        return default
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__}: {name!r}")
    if not name.strip():
        return default
    if len(name) > MAX_IDENTIFIER_CHARS or _IDENTIFIER.fullmatch(name) is None:
        raise ValueError(
            f"invalid {what} {name!r}: it must match {IDENTIFIER_RULE} "
            f"and be at most {MAX_IDENTIFIER_CHARS} characters"
        )
    return name


def quote_table(database: str, table: str) -> str:
    """```db`.`table``` for names that :func:`identifier` accepted (no backtick can occur)."""
    return f"`{database}`.`{table}`"


def check_text(value: object, what: str) -> str:
    """``value`` if it is a str that utf8mb4 can store, else the error naming ``what``.

    >>> check_text("ns/", "prefix")
    'ns/'
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} {value!r} is not valid Unicode text (it contains a lone surrogate), "
            "so it cannot be stored in utf8mb4"
        ) from None
    return value


#: How the command line writes the anonymous user (``--user -``); reserved, so that no user's
#: sessions are ever taken for the anonymous user's there (or the reverse).
CLI_ANONYMOUS = "-"


def user_part(user_id: Optional[str]) -> str:
    """The user half of the packed id: ``__anon__`` for None or blank.

    >>> user_part(None), user_part("  "), user_part("alice")
    ('__anon__', '__anon__', 'alice')
    """
    if user_id is None:
        return ANONYMOUS
    check_text(user_id, "user_id")
    if not user_id.strip():
        return ANONYMOUS
    if SEPARATOR in user_id:
        raise ValueError(
            f"user_id {user_id!r} contains ':', which would make the packed "
            "'<user>:<session>' id ambiguous"
        )
    if user_id == ANONYMOUS:
        raise ValueError(f"user_id {ANONYMOUS!r} is reserved for anonymous callers (pass None instead)")
    if user_id == CLI_ANONYMOUS:
        raise ValueError(f"user_id {CLI_ANONYMOUS!r} is reserved: it is how the command line names the anonymous "
                         "user (pass None for it here)")
    return user_id


def user_prefix(user_id: Optional[str]) -> str:
    """``"<user>:"``, the prefix every packed id of this user starts with."""
    return user_part(user_id) + SEPARATOR


def pack(user_id: Optional[str], session_id: str) -> str:
    """Pack ``(user_id, session_id)`` into the stored ``session_id`` column value.

    >>> pack("alice", "s1"), pack(None, "s1")
    ('alice:s1', '__anon__:s1')
    """
    user = user_part(user_id)
    check_text(session_id, "session_id")
    if not session_id.strip():
        raise ValueError(f"session_id {session_id!r} is blank")
    packed = user + SEPARATOR + session_id
    if len(packed) > MAX_ID_CHARS:
        raise ValueError(
            f"the packed session id '<user>:<session>' is {len(packed)} characters "
            f"(user_id {user[:40]!r}..., session_id {session_id[:40]!r}...); "
            f"at most {MAX_ID_CHARS} fit the session_id column"
        )
    return packed


def _loose(text: str) -> str:
    """``text`` as a case- and accent-insensitive collation (``*_ci``) compares it."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def state_key(key: str, *, is_list: bool = False, exact: bool = True) -> str:
    """Validate a state key; a list key must leave room for its ``:_hash`` row.

    ``exact=False`` (a table whose key columns ignore case or accents) also refuses keys that
    such a collation would take for a hash row, e.g. ``memory:_HASH``.

    >>> state_key("memory", is_list=True)
    'memory'
    """
    check_text(key, "key")
    if not key.strip():
        raise ValueError(f"key {key!r} is blank")
    if key.endswith(HASH_SUFFIX) or (not exact and _loose(key).rstrip(" ").endswith(HASH_SUFFIX)):
        raise ValueError(
            f"key {key!r} ends with {HASH_SUFFIX!r}"
            f"{'' if key.endswith(HASH_SUFFIX) else ' as this table compares keys (ignoring case and accents)'}"
            ", which is reserved for list hash rows"
        )
    limit = MAX_ID_CHARS - len(HASH_SUFFIX) if is_list else MAX_ID_CHARS
    if len(key) > limit:
        what = f"a list key (its hash key adds {len(HASH_SUFFIX)})" if is_list else "a key"
        raise ValueError(f"key {key[:40]!r}... of {len(key)} characters is too long: {what} may have at most {limit}")
    return key


def hash_key(key: str) -> str:
    """The state_key of a list's hash row."""
    return key + HASH_SUFFIX


def history_session(packed: str) -> str:
    """The ``session_id`` under which a session's archived list items are kept.

    A digest of the packed id (so it fits the column and has no ':'); ``state_key`` is the
    list's key and ``item_index`` the archive order.

    >>> history_session("alice:chat-1")[:11], ":" in history_session("alice:chat-1")
    ('__history__', False)
    """
    return HISTORY_PREFIX + hashlib.blake2b(packed.encode("utf-8"), digest_size=20).hexdigest()


def is_packed(session_id: str) -> bool:
    """Whether a stored ``session_id`` is a caller's session (not an internal row)."""
    return SEPARATOR in session_id


def unpack(packed: str) -> tuple[Optional[str], str]:
    """The ``(user_id, session_id)`` of a packed id (None for the anonymous user).

    >>> unpack("alice:chat-1"), unpack("__anon__:s")
    (('alice', 'chat-1'), (None, 's'))
    """
    user, _, session = packed.partition(SEPARATOR)
    return (None if user == ANONYMOUS else user), session
