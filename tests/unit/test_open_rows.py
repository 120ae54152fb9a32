"""crypto.RowCipher.open_rows (the encrypted list read, issue 21): the same values, or the same
DecryptionError naming the same row, as opening each row alone with ``open``; no server."""

from __future__ import annotations

import os
import random

import orjson
import pytest

pytest.importorskip("cryptography", reason="encryption extra (make test installs it)")

from mysql_state import DecryptionError, Keyring  # noqa: E402
from mysql_state.crypto import PREFIX, RowCipher  # noqa: E402

SID, KEY, TABLE = "alice:c1", "memory", "agentscope_sessions"
SECRET = "my blood test says"
K1, K2 = os.urandom(32), os.urandom(32)


def cipher(current: str = "k2") -> RowCipher:
    return RowCipher(Keyring({"k2": K2, "k1": K1}, current=current), TABLE)


def items(n: int) -> list:
    return [{"role": "user", "content": f"{SECRET} {i}", "n": i} for i in range(n)]


def sealed(c: RowCipher, values: list, first: int = 0) -> list[tuple]:
    return [(c.seal(SID, KEY, i, orjson.dumps(v)).decode(),) for i, v in enumerate(values, first)]


def one_by_one(c: RowCipher, rows: list, first: int) -> list:
    """The reference: each row opened alone by ``open``."""
    return [orjson.loads(c.open(SID, KEY, i, r[0])) for i, r in enumerate(rows, first)]


def outcome(f):
    try:
        return "ok", f()
    except DecryptionError as exc:
        return "error", (exc.session_id, exc.key, exc.index, exc.key_id, str(exc))


def test_rows_under_the_current_key_open_with_their_indexes_from_first():
    c = cipher()
    for first in (0, 7):
        rows = sealed(c, items(300), first)
        assert c.open_rows(SID, KEY, rows, 0, first, orjson.loads) == items(300)
    # the text in another column (the two-column shape: index, text)
    rows = [(i, r[0]) for i, r in enumerate(sealed(c, items(5)))]
    assert c.open_rows(SID, KEY, rows, 1, 0, orjson.loads) == items(5)
    assert c.open_rows(SID, KEY, [], 0, 0, orjson.loads) == []


def test_rows_under_an_older_key_plaintext_and_bytes_rows_open_beside_current_ones():
    old, new = cipher("k1"), cipher("k2")
    values = items(40)
    rows = sealed(old, values[:20]) + sealed(new, values[20:], 20)
    rows[3] = (orjson.dumps(values[3]).decode(),)  # written before encryption
    rows[25] = (rows[25][0].encode(),)  # a driver that hands bytes
    assert new.open_rows(SID, KEY, rows, 0, 0, orjson.loads) == values == one_by_one(new, rows, 0)


@pytest.mark.parametrize("damage", ["flip", "swap", "unknown key id", "same-length unknown key id",
                                    "cut", "not ascii", "another place", "old key then flip"])
def test_a_row_that_does_not_open_raises_the_error_that_open_raises_for_it(damage):
    c = cipher()
    values = items(200)
    rows = sealed(c, values)
    at = 137
    text = rows[at][0]
    if damage == "flip":
        rows[at] = (text[:-5] + ("A" if text[-5] != "A" else "B") + text[-4:],)
    elif damage == "swap":
        rows[at], rows[at + 1] = rows[at + 1], rows[at]
    elif damage == "unknown key id":
        rows[at] = (text.replace(PREFIX + "k2:", PREFIX + "k-gone:"),)
    elif damage == "same-length unknown key id":  # the body is authentic: only the key id says no
        rows[at] = (text.replace(PREFIX + "k2:", PREFIX + "k9:"),)
    elif damage == "cut":
        rows[at] = (text[: len(PREFIX) + 10],)
    elif damage == "not ascii":
        rows[at] = (text[:40] + "é" + text[41:],)
    elif damage == "another place":
        rows[at] = (c.seal("bob:c1", KEY, at, orjson.dumps(values[at])).decode(),)
    elif damage == "old key then flip":
        rows[:at] = sealed(cipher("k1"), values[:at])
        rows[at] = (text[:-5] + ("A" if text[-5] != "A" else "B") + text[-4:],)
    got = outcome(lambda: c.open_rows(SID, KEY, rows, 0, 0, orjson.loads))
    assert got == outcome(lambda: one_by_one(c, rows, 0))
    assert got[0] == "error" and got[1][:3] == (SID, KEY, at)
    assert SECRET not in got[1][4] and K1.hex() not in got[1][4] and K2.hex() not in got[1][4]


def test_random_mixes_agree_with_opening_each_row_alone():
    rng = random.Random(20261203)
    old, new = cipher("k1"), cipher("k2")
    for _ in range(200):
        n = rng.randrange(0, 12)
        first = rng.randrange(0, 3)
        values = items(n + first)[first:]
        rows = []
        for i, v in enumerate(values, first):
            kind = rng.choice(["new"] * 6 + ["old", "plain", "flip", "moved"])
            if kind == "plain":
                rows.append((orjson.dumps(v).decode(),))
                continue
            text = (old if kind == "old" else new).seal(SID, KEY, i + (kind == "moved"), orjson.dumps(v)).decode()
            if kind == "flip":
                text = text[:-5] + ("A" if text[-5] != "A" else "B") + text[-4:]
            rows.append((text,))
        got = outcome(lambda: new.open_rows(SID, KEY, rows, 0, first, orjson.loads))
        assert got == outcome(lambda: one_by_one(new, rows, first))
        if got[0] == "ok":
            assert got[1] == values


def test_a_json_error_is_left_to_the_caller_to_name():
    c = cipher()
    rows = sealed(c, items(3))
    rows[1] = (c.seal(SID, KEY, 1, b"{not json").decode(),)
    with pytest.raises(ValueError):
        c.open_rows(SID, KEY, rows, 0, 0, orjson.loads)
