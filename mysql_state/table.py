"""The table context: what every engine and concern module is given instead of the store.

One :class:`Table` per store: the table's names, every statement of :mod:`mysql_state.sql`
rendered once for this table and collation, the :class:`~mysql_state.sealer.Sealer`, what
the schema probe found (exact key collation, ``max_allowed_packet``) and the options
(``keep_history``). Engines read it; only the schema steps (``migrate``, ``doctor``) change
``exact_keys`` through :meth:`Table.set_exact`.
"""

from __future__ import annotations

from . import keys, sql
from .sealer import Sealer

__all__ = ["Table"]


class Table:
    """The context of one store's table (see the module doc)."""

    def __init__(self, database: str, name: str, collation: str, max_allowed_packet: int, exact_keys: bool,
                 sealer: Sealer, *, keep_history: bool = False, isolate_each: bool = False) -> None:
        self.database = database
        self.name = name
        #: The backtick-quoted ``db.table`` the statements name.
        self.quoted = keys.quote_table(database, name)
        self.collation = collation
        self.max_allowed_packet = max_allowed_packet
        #: The most bytes one multi-row statement of the store carries: the server's
        #: ``max_allowed_packet`` less room for the packet's header and the statement's SQL
        #: around the rows (:func:`sql.upsert_rows` cuts its statements under it).
        self.statement_bytes = max_allowed_packet - sql.PACKET_MARGIN
        self.sealer = sealer
        self.keep_history = keep_history
        #: The connections are not the store's own: isolation is set per transaction (so again
        #: after a ROLLBACK that begins a new one).
        self.isolate_each = isolate_each
        #: Every statement of :mod:`mysql_state.sql` by name, rendered for this table.
        self.statements: dict[str, str] = {
            n: self.q(getattr(sql, n)) for n in dir(sql) if n.isupper() and isinstance(getattr(sql, n), str)
        }
        #: The multi-row upsert's head and tail (see :func:`sql.upsert_rows`).
        self.upsert = (self.statements["UPSERT_ROWS_HEAD"], self.statements["UPSERT_ROWS_TAIL"])
        self.set_exact(exact_keys)

    def q(self, template: str) -> str:
        """A statement template (``{t}``, ``{c}``) rendered for this table."""
        return sql.render(template, self.quoted, self.collation)

    def set_exact(self, exact_keys: bool) -> None:
        """Whether the key columns compare exactly; if not, ids ending in a space are refused."""
        self.exact_keys = bool(exact_keys)
        self.pads_spaces = not self.exact_keys
