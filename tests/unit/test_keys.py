"""keys: the id rules and the packing, no server."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, strategies as st

from mysql_state import keys


def test_doctests():
    assert doctest.testmod(keys).failed == 0


def test_pack_and_unpack_round_trip():
    assert keys.pack("alice", "chat-1") == "alice:chat-1"
    assert keys.pack(None, "s") == keys.pack("  ", "s") == "__anon__:s"
    assert keys.unpack("alice:chat-1") == ("alice", "chat-1")
    assert keys.unpack("__anon__:a:b") == (None, "a:b")


@given(user=st.one_of(st.none(), st.text(min_size=1, max_size=20).filter(lambda u: ":" not in u and u.strip()
                                                                             and u != keys.ANONYMOUS)),
       session=st.text(min_size=1, max_size=40).filter(str.strip))
def test_packing_is_unambiguous(user, session):
    """No two (user, session) pairs pack to one id: unpack inverts pack."""
    try:
        packed = keys.pack(user, session)
    except ValueError:
        return  # a lone surrogate: refused, never stored
    assert keys.unpack(packed) == (user, session)


@pytest.mark.parametrize("user, why", [
    ("a:b", "contains ':'"),
    ("__anon__", "reserved"),
])
def test_bad_users_are_refused_naming_the_rule(user, why):
    with pytest.raises(ValueError, match=why):
        keys.pack(user, "s")


def test_bad_sessions_and_keys_are_refused():
    with pytest.raises(ValueError, match="blank"):
        keys.pack("u", "   ")
    with pytest.raises(TypeError, match="session_id must be a str"):
        keys.pack("u", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lone surrogate"):
        keys.pack("u", "s\ud800")
    with pytest.raises(ValueError, match="at most 255"):
        keys.pack("u", "s" * 300)
    with pytest.raises(ValueError, match="reserved for list hash rows"):
        keys.state_key("memory:_hash")
    with pytest.raises(ValueError, match="ignoring case"):
        keys.state_key("memory:_HASH", exact=False)
    assert keys.state_key("memory:_HASH") == "memory:_HASH"  # an exact table tells them apart
    with pytest.raises(ValueError, match="list key"):
        keys.state_key("k" * 250, is_list=True)
    assert keys.state_key("k" * 250) == "k" * 250


def test_identifiers_are_injection_proof():
    assert keys.identifier("my-db_1", "database name", "x") == "my-db_1"
    for bad in ("a`b", "a;drop", "1abc", "a b", "x" * 65):
        with pytest.raises(ValueError, match="must match"):
            keys.identifier(bad, "table name", "x")
    assert keys.quote_table("a", "b") == "`a`.`b`"


def test_internal_ids_never_collide_with_packed_ones():
    h = keys.history_session("alice:chat-1")
    assert not keys.is_packed(h) and not keys.is_packed(keys.CATALOG_SESSION)
    assert h == keys.history_session("alice:chat-1") != keys.history_session("alice:chat-2")
    assert keys.hash_key("m") == "m" + keys.HASH_SUFFIX
