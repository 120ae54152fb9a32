"""Where :class:`~mysql_state.langgraph.MysqlStore` keeps LangGraph's memory: pure key encoding.

Everything of one ``MysqlStore`` lives in ONE store session, ``(user_id, "langgraph-store")``,
as single values (``item_index = 0``), so the operator's tools (``sessions()``, ``export`` /
``import_rows``, ``forget_user``, ``delete``, ``doctor``, encryption at rest) cover it with no
code of their own. A namespace ``("users", "alice")`` is encoded as ``"users.alice."``: each
label followed by ``"."``, which no label may contain (LangGraph refuses it), so a namespace
prefix is a key prefix and ``("a", "b")`` never matches the prefix ``("a", "bc")``. A second
``"."`` ends the namespace; an item's key follows and is closed by a last ``"."`` (so no key can
end with the store's reserved ``":_hash"`` or a space). Three regions, by the first character:

* ``i<ns>.<key>.`` the item: ``{"value", "created_at", "updated_at", "seq", "indexed"}``;
  ``i<ns>.`` the namespace's marker: ``{"namespace", "seq", "items"}`` (its place in listing
  order, and how many item rows it has), adjacent to its items;
* ``t<ns>.<key>.`` the item's expiry, only for items put with a TTL:
  ``{"expires_at", "ttl_minutes"}`` (small, so refreshing on read and sweeping never rewrite or
  read the value);
* ``v<ns>.<key>.`` the item's vectors, only when it was embedded: ``{"vectors": {path: [...]}}``.

>>> item_key(ITEMS, ("users", "alice"), "prefs")
'iusers.alice..prefs.'
>>> parse("iusers.alice..prefs.")
('i', ('users', 'alice'), 'prefs')
>>> parse(marker_key(("users", "alice")))
('i', ('users', 'alice'), None)
"""

from __future__ import annotations

from typing import Optional

from .layout import MEMORY_SESSION as SESSION  # the store session holding one MysqlStore's memory
ITEMS, TTLS, VECTORS = "i", "t", "v"
END = "."  #: ends each label, the namespace (a second one) and the key
MAX_KEY_CHARS = 255  # the store's state_key limit (keys.MAX_ID_CHARS)


def ns_text(namespace: tuple[str, ...]) -> str:
    """``("a", "b")`` -> ``"a.b."``: a namespace prefix is a prefix of this text."""
    return "".join(label + END for label in namespace)


def item_key(region: str, namespace: tuple[str, ...], key: str) -> str:
    """The state_key of an item's row in ``region`` (ITEMS, TTLS or VECTORS)."""
    return region + ns_text(namespace) + END + key + END


def marker_key(namespace: tuple[str, ...]) -> str:
    """The state_key of a namespace's marker row (in the ITEMS region, before its items)."""
    return ITEMS + ns_text(namespace) + END


def prefix_of(region: str, namespace_prefix: tuple[str, ...]) -> str:
    """The key prefix of every row in ``region`` under ``namespace_prefix`` (``()``: all)."""
    return region + ns_text(namespace_prefix)


def key_length(namespace: tuple[str, ...], key: str) -> int:
    """Characters of an item's state_key (the same in every region)."""
    return len(item_key(ITEMS, namespace, key))


def _text(namespace: tuple[str, ...], key: str) -> bool:
    try:
        item_key(ITEMS, namespace, key).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fits(namespace: tuple[str, ...], key: str) -> bool:
    """Whether an item's rows can be stored: a state_key of at most 255 characters, all of
    them Unicode text (no lone surrogate). A read of one that cannot finds nothing."""
    return key_length(namespace, key) <= MAX_KEY_CHARS and _text(namespace, key)


def check_fits(namespace: tuple[str, ...], key: str) -> None:
    """Refuse, before any SQL, an item whose namespace and key do not fit one state_key."""
    if not _text(namespace, key):
        raise ValueError(
            f"namespace {namespace!r} with key {key[:60]!r} is not valid Unicode text (a lone surrogate), "
            "so MysqlStore cannot store it in utf8mb4"
        )
    n = key_length(namespace, key)
    if n > MAX_KEY_CHARS:
        raise ValueError(
            f"namespace {namespace!r} with key {key[:60]!r}{'...' if len(key) > 60 else ''} is too long for "
            f"MysqlStore: it is stored as one state_key of {n} characters (each label + 1, the key + 3), "
            f"and a state_key has at most {MAX_KEY_CHARS}; use shorter labels or a shorter key"
        )


def parse(state_key: str) -> Optional[tuple[str, tuple[str, ...], Optional[str]]]:
    """``(region, namespace, key)`` of a state_key this layout wrote (key None for a
    namespace marker), or None for a key it cannot have written."""
    if len(state_key) < 3 or state_key[0] not in (ITEMS, TTLS, VECTORS):
        return None
    body = state_key[1:]
    end = body.find(END + END)
    if end <= 0:
        return None
    labels = tuple(body[:end].split(END))
    rest = body[end + 2 :]
    if rest == "":
        return (state_key[0], labels, None) if state_key[0] == ITEMS else None
    if not rest.endswith(END):
        return None
    return state_key[0], labels, rest[:-1]
