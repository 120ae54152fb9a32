"""Replica positions, pure: what a "session" read waits for. MySQL GTID sets (tested here as
text only: MySQL 8 cannot be installed on this machine; the store's replica tests run MariaDB)."""

from __future__ import annotations

from mysql_state.replicas import UNKNOWN, merge_gtids, position_read

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_a_mysql_position_recorded_at_every_write_stays_as_short_as_gtid_executed():
    """Joined as text, the position grew by one part a write (999 parts, 43 KB after 1 000
    writes), sent with every wait and held per session."""
    pos = None
    for i in range(1, 1001):
        pos = merge_gtids(pos, f"{UUID}:1-{i}")
    assert pos == f"{UUID}:1-1000"


def test_mysql_sets_are_united_interval_by_interval_per_server():
    assert merge_gtids(f"{UUID}:1-5:9-12,\n{OTHER}:3", f"{UUID.upper()}:6-8") == f"{UUID}:1-12,{OTHER}:3"
    assert merge_gtids(f"{UUID}:1-3", f"{UUID}:5") == f"{UUID}:1-3:5"  # a gap stays a gap
    assert merge_gtids(f"{UUID}:tag:1-5", f"{UUID}:1-3") == f"{UUID}:tag:1-5,{UUID}:1-3"  # tagged: as text


def test_mariadb_positions_keep_the_highest_seqno_per_domain_and_unknown_wins():
    assert merge_gtids("0-1-5,1-1-2", "0-1-9") == "0-1-9,1-1-2"
    assert merge_gtids("0-1-5", UNKNOWN) == UNKNOWN and merge_gtids(None, "0-1-5") == "0-1-5"


def test_an_empty_position_sends_session_reads_to_the_primary():
    """MySQL's default gtid_mode=OFF (or a primary without a binary log) reads as '': it was
    taken for "nothing to wait for", and "session" reads went to a replica unchecked."""
    assert position_read("") == position_read("  ") == position_read(None) == UNKNOWN
    assert position_read("0-1-9") == "0-1-9"
