"""Size limits: batches under max_allowed_packet; a value too large is refused, not half-written."""

from __future__ import annotations

import pytest

from mysql_state import MysqlAgentStateStore, ValueTooLargeError

from .conftest import Raw, private_server
from .test_faults import check_list_rows


def test_values_of_several_megabytes(store, raw):
    big = {"text": "é" * 3_000_000}
    store.save("u", "s", "big", big)
    assert store.get("u", "s", "big") == big
    items = [{"i": i, "blob": chr(0x4E00 + i) * 1_500_000} for i in range(8)]  # ~36 MB of UTF-8 in all
    store.save_list("u", "s", "list", items)
    assert store.get_list("u", "s", "list") == items
    assert check_list_rows(raw, "u:s", "list") == items


@pytest.fixture(scope="module")
def small_packet_server():
    server = private_server("--max-allowed-packet=65536")
    yield server
    server.stop()


def test_small_max_allowed_packet_batches_lists_and_refuses_single_values(small_packet_server, report):
    store = MysqlAgentStateStore.from_url(small_packet_server.url, database_name="small", create_if_not_exist=True)
    assert store.max_allowed_packet == 65536
    items = [{"i": i, "text": 'quote " and \\ backslash ' * 900} for i in range(60)]  # ~1.3 MB, each ~23 KB
    store.save_list("u", "s", "m", items)
    assert store.get_list("u", "s", "m") == items
    raw = Raw(small_packet_server.url, "small")
    assert check_list_rows(raw, "u:s", "m") == items
    store.append_list("u", "s", "m", items[:10])
    assert store.list_length("u", "s", "m") == 70
    before = raw.rows()
    too_big = {"text": "x" * 70_000}
    with pytest.raises(ValueTooLargeError, match=r"70011 bytes.*max_allowed_packet of 65536 bytes; nothing was written"):
        store.save("u", "s", "v", too_big)
    with pytest.raises(ValueTooLargeError, match="item 70 of list 'm'"):
        store.save_list("u", "s", "m", items + items[:10] + [too_big])
    with pytest.raises(ValueTooLargeError, match="max_allowed_packet"):
        store.append_list("u", "s", "m", [too_big])
    assert raw.rows() == before  # nothing written
    store.save("u", "s", "v", {"small": True})  # the store keeps working
    assert store.get("u", "s", "v") == {"small": True}
    raw.close()
    store.close()
    report("sizes: 60 items of ~23 KB saved through a 64 KB max_allowed_packet in batches; "
           "a 70 KB value refused with its size and the limit, nothing written")


# ---- batches sized by the bytes actually sent ---------------------------------------------


@pytest.fixture(scope="module")
def small_packet_url():
    server = private_server("--max-allowed-packet=65536")
    yield server.url
    server.stop()


def test_batches_count_the_escaping_of_ids(small_packet_url):
    store = MysqlAgentStateStore.from_url(small_packet_url, database_name="esc", create_if_not_exist=True)
    raw = Raw(small_packet_url, "esc")
    try:
        user, session, key = "u\\'\"", "s" + "\\'" * 100, "k" + "'\\\n" * 70
        items = [{"i": i, "t": "x" * 880} for i in range(200)]
        store.save_list(user, session, key, items)
        assert store.append_list(user, session, key, items[:100]) == 300
        sid = f"{user}:{session}"
        assert check_list_rows(raw, sid, key) == items + items[:100]
    finally:
        raw.close()
        store.close()
