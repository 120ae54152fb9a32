"""Rows the server reads, per table: how the adapters' tests show that a read costs what it
returns (a window of a long history, a listing beside long sessions), not the history's length."""

from __future__ import annotations

import asyncio

import pytest


class RowsRead:
    """Rows the server read from one test database's table, per call: MariaDB's
    ``information_schema.TABLE_STATISTICS`` (``userstat``), else MySQL's performance_schema.
    Per table, so other connections and other tests' databases do not count."""

    def __init__(self, raw) -> None:
        self.raw = raw
        has_userstat = raw.query("SHOW GLOBAL VARIABLES LIKE 'userstat'")
        if has_userstat:
            self.restore = has_userstat[0][1]
            raw.execute("SET GLOBAL userstat = 1")
            self.sql = ("SELECT COALESCE(SUM(ROWS_READ), 0) FROM information_schema.TABLE_STATISTICS"
                        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s")
        elif raw.query("SELECT @@performance_schema")[0][0]:
            self.restore = None
            self.sql = ("SELECT COALESCE(SUM(COUNT_FETCH), 0) FROM performance_schema.table_io_waits_summary_by_table"
                        " WHERE OBJECT_SCHEMA = %s AND OBJECT_NAME = %s")
        else:
            pytest.skip("the server counts no rows read per table (neither userstat nor performance_schema)")

    def total(self) -> int:
        return int(self.raw.query(self.sql, (self.raw.database, self.raw.table))[0][0])

    def of(self, coro) -> int:
        """Rows read while ``coro`` runs (to completion, on a loop of its own)."""
        before = self.total()
        asyncio.run(coro)
        return self.total() - before

    def close(self) -> None:
        if self.restore is not None:
            self.raw.execute(f"SET GLOBAL userstat = {'1' if self.restore in ('ON', '1') else '0'}")


@pytest.fixture
def rows_read(raw):
    counter = RowsRead(raw)
    yield counter
    counter.close()
