"""crypto: AES-256-GCM rows bound to their place, no server."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("cryptography", reason="encryption extra (make test installs it)")

from mysql_state import DecryptionError, Keyring  # noqa: E402
from mysql_state.crypto import RowCipher, is_sealed, key_id_of  # noqa: E402


def ring(*ids: str) -> Keyring:
    return Keyring({i: os.urandom(32) for i in ids}, current=ids[-1])


def test_seal_and_open_round_trip_under_the_current_key():
    cipher = RowCipher(ring("k1"), "agentscope_sessions")
    sealed = cipher.seal("u:s", "memory", 3, b'{"text":"secret"}')
    assert is_sealed(sealed.decode()) and b"secret" not in sealed
    assert key_id_of(sealed) == "k1"
    assert cipher.open("u:s", "memory", 3, sealed.decode()) == b'{"text":"secret"}'
    assert cipher.opener("u:s", "memory")(3, sealed.decode()) == b'{"text":"secret"}'
    assert cipher.open("u:s", "memory", 3, '{"plain":1}') == b'{"plain":1}'  # written before encryption


@pytest.mark.parametrize("place", [("u:t", "memory", 3), ("u:s", "other", 3), ("u:s", "memory", 4)])
def test_a_row_moved_to_another_place_does_not_open(place):
    cipher = RowCipher(ring("k1"), "agentscope_sessions")
    sealed = cipher.seal("u:s", "memory", 3, b"1").decode()
    with pytest.raises(DecryptionError, match="moved from another"):
        cipher.open(*place, sealed)


def test_another_table_or_a_missing_key_is_a_decryption_error():
    keys = ring("k1")
    sealed = RowCipher(keys, "t1").seal("u:s", "k", 0, b"1").decode()
    with pytest.raises(DecryptionError):
        RowCipher(keys, "t2").open("u:s", "k", 0, sealed)
    with pytest.raises(DecryptionError, match="not in this store's keyring"):
        RowCipher(ring("k2"), "t1").open("u:s", "k", 0, sealed)


def test_key_material_never_shows_in_reprs():
    material = os.urandom(32)
    keys = Keyring({"k1": material}, current="k1")
    for text in (repr(keys), str(keys)):
        assert material.hex() not in text and repr(material) not in text
