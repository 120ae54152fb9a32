"""The Python peers a user would pick instead, each behind the same small interface.

Every peer stores the same conversation in its own message type (built untimed, as an agent
holds it in memory), on the same server, in a database of its own. Async peers run on one
event loop owned by the benchmark thread (``loop.run_until_complete`` per call, ~20 us).

* LangGraph ``PyMySQLSaver`` (langgraph-checkpoint-mysql): one turn = one ``put`` of a new
  checkpoint carrying the whole ``messages`` channel (how LangGraph persists a channel
  version); the generous minimum: no ``put_writes``, no ``get_tuple`` before it. Its
  database is created with COLLATE utf8mb4_general_ci: in a utf8mb4_unicode_ci database
  (this server's default, and the store's) ``put`` fails with error 1267 "Illegal mix of
  collations (utf8mb4_unicode_ci,IMPLICIT) and (utf8mb4_general_ci,IMPLICIT)" on MariaDB;
  and its session sets group_concat_max_len = 1 GB (else get_tuple of a channel over 1 MB
  returns truncated JSON on MariaDB: "JSONDecodeError: Unterminated string").
* openai-agents ``SQLAlchemySession`` (aiomysql): ``add_items`` / ``get_items``; tables created
  by hand (``create_tables=True`` fails on MySQL: VARCHAR without length).
* google-adk ``DatabaseSessionService`` (``mysql+aiomysql://``): ``append_event`` per message;
  ``get_session``. Seeded in bulk through its own ORM rows (append_event per message would take
  a minute at N = 10 000); the timed operations use the public API only.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
from typing import Any, Optional
from urllib.parse import quote

USER = "bench"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def sa_url(kwargs: dict, database: str) -> str:
    """A mysql+aiomysql:// URL (never mariadb+: ADK's types then lose DATETIME(6))."""
    user = quote(kwargs.get("user", "root"), safe="")
    pw = kwargs.get("password") or ""
    auth = user + (":" + quote(pw, safe="") if pw else "")
    host = kwargs.get("host", "127.0.0.1")
    port = kwargs.get("port", 3306)
    url = f"mysql+aiomysql://{auth}@{host}:{port}/{database}"
    if kwargs.get("unix_socket"):
        url += f"?unix_socket={kwargs['unix_socket']}"
    return url


class Peer:
    name = "peer"
    dist = ""
    supports: set[str] = set()
    why_not: dict[str, str] = {}

    @property
    def label(self) -> str:
        return f"{self.name} {version(self.dist)}"


# ---- LangGraph --------------------------------------------------------------------------------


class LangGraphPeer(Peer):
    name = "langgraph PyMySQLSaver"
    dist = "langgraph-checkpoint-mysql"
    supports = {"append", "grow", "compact", "load_all", "load_tail"}
    why_not = {"load_tail": "no window read: get_tuple loads the whole channel"}

    def __init__(self, kwargs: dict, database: str) -> None:
        import pymysql
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

        self._types = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}
        self.conn = pymysql.connect(autocommit=True, database=database, charset="utf8mb4", **kwargs)
        # On MariaDB its JSON aggregation goes through GROUP_CONCAT: with the default
        # group_concat_max_len (1 MB) get_tuple of a channel over ~1 MB (N >= ~2000 messages
        # here) fails with "JSONDecodeError: Unterminated string" (truncated JSON).
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION group_concat_max_len = 1073741824")
        self.saver = PyMySQLSaver(self.conn)
        self.saver.setup()
        self.cfg: dict[str, dict] = {}
        self.ver: dict[str, Any] = {}

    def convert(self, msgs: list[dict]) -> list:
        return [self._types[m["role"]](content=m["content"]) for m in msgs]

    def _put(self, tid: str, messages: list) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        v = self.saver.get_next_version(self.ver.get(tid), None)
        ck = empty_checkpoint()
        ck["channel_values"] = {"messages": messages}
        ck["channel_versions"] = {"messages": v}
        cfg = self.cfg.get(tid) or {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        self.cfg[tid] = self.saver.put(cfg, ck, {"source": "loop", "step": 1}, {"messages": v})
        self.ver[tid] = v

    def seed(self, tid: str, messages: list) -> None:
        self._put(tid, messages)

    def write_list(self, tid: str, messages: list) -> None:
        self._put(tid, messages)

    def load_all(self, tid: str) -> list:
        tup = self.saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}})
        return tup.checkpoint["channel_values"]["messages"]

    def close(self) -> None:
        self.conn.close()


# ---- openai-agents ------------------------------------------------------------------------------

OA_TABLES = (
    """CREATE TABLE IF NOT EXISTS agent_sessions (
        session_id VARCHAR(255) NOT NULL PRIMARY KEY,
        created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
        updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS agent_messages (
        id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
        session_id VARCHAR(255) NOT NULL,
        message_data TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
        INDEX idx_agent_messages_session_time (session_id, created_at),
        FOREIGN KEY (session_id) REFERENCES agent_sessions(session_id) ON DELETE CASCADE)""",
)


class OpenAIAgentsPeer(Peer):
    name = "openai-agents SQLAlchemySession"
    dist = "openai-agents"
    supports = {"append", "grow", "compact", "load_all", "load_tail"}
    why_not: dict[str, str] = {}

    def __init__(self, kwargs: dict, database: str, loop: asyncio.AbstractEventLoop) -> None:
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        self.loop = loop
        self._cls = SQLAlchemySession
        self.engine = create_async_engine(sa_url(kwargs, database))

        async def setup() -> None:
            async with self.engine.begin() as conn:
                for ddl in OA_TABLES:
                    await conn.execute(text(ddl))

        self.loop.run_until_complete(setup())
        self.sessions: dict[str, Any] = {}

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def convert(self, msgs: list[dict]) -> list:
        return [{"role": m["role"], "content": m["content"]} for m in msgs]

    def session(self, sid: str):
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = self._cls(sid, engine=self.engine, create_tables=False)
        return s

    def seed(self, sid: str, items: list) -> None:
        s = self.session(sid)
        self.run(s.clear_session())
        self.run(s.add_items(items))

    def append(self, sid: str, items: list) -> None:
        self.run(self.session(sid).add_items(items))

    def pop(self, sid: str, k: int) -> None:
        for _ in range(k):
            self.run(self.session(sid).pop_item())

    def replace_last(self, sid: str, items: list) -> None:
        """The last item changed and one more: pop it, add both (no update API)."""
        s = self.session(sid)
        self.run(s.pop_item())
        self.run(s.add_items(items))

    def replace_all(self, sid: str, items: list) -> None:
        s = self.session(sid)
        self.run(s.clear_session())
        self.run(s.add_items(items))

    def load_all(self, sid: str) -> list:
        return self.run(self.session(sid).get_items())

    def load_tail(self, sid: str, n: int) -> list:
        return self.run(self.session(sid).get_items(limit=n))

    def close(self) -> None:
        self.run(self.engine.dispose())


# ---- google-adk ----------------------------------------------------------------------------------


class ADKPeer(Peer):
    name = "google-adk DatabaseSessionService"
    dist = "google-adk"
    supports = {"append", "load_all", "load_tail"}
    why_not = {
        "grow": "events are immutable: no API changes an appended event",
        "compact": "no API deletes or replaces events of a session",
    }

    def __init__(self, kwargs: dict, database: str, loop: asyncio.AbstractEventLoop) -> None:
        from google.adk.sessions import DatabaseSessionService

        self.loop = loop
        self.svc = DatabaseSessionService(db_url=sa_url(kwargs, database))
        self.sessions: dict[str, Any] = {}

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def convert(self, msgs: list[dict]) -> list:
        from google.adk.events import Event
        from google.genai import types

        out = []
        for m in msgs:
            r = "user" if m["role"] == "user" else "model"
            out.append(
                Event(
                    id=str(uuid.uuid4()),
                    invocation_id="inv",
                    author=r,
                    content=types.Content(role=r, parts=[types.Part(text=m["content"])]),
                )
            )
        return out

    def fresh(self, events: list) -> list:
        """Copies with new ids (an event id is unique per session)."""
        return [e.model_copy(update={"id": str(uuid.uuid4())}) for e in events]

    def seed(self, sid: str, events: list) -> None:
        async def go():
            await self.svc.create_session(app_name="bench", user_id=USER, session_id=sid)
            schema = self.svc._get_schema_classes()
            stub = await self.svc.get_session(app_name="bench", user_id=USER, session_id=sid)
            async with self.svc.database_session_factory() as sql:
                sql.add_all([schema.StorageEvent.from_event(stub, e) for e in events])
                await sql.commit()
            return await self.svc.get_session(app_name="bench", user_id=USER, session_id=sid)

        self.sessions[sid] = self.run(go())

    def append(self, sid: str, events: list) -> None:
        sess = self.sessions[sid]
        for e in events:
            self.run(self.svc.append_event(sess, e))

    def drop_events(self, sid: str, events: list) -> None:
        """Untimed reset: remove appended events (rows and in-memory copies)."""
        from sqlalchemy import text

        ids = [e.id for e in events]

        async def go():
            async with self.svc.db_engine.begin() as conn:
                for i in ids:
                    await conn.execute(text("DELETE FROM events WHERE id = :i AND session_id = :s"), {"i": i, "s": sid})

        self.run(go())
        sess = self.sessions[sid]
        sess.events[:] = [e for e in sess.events if e.id not in set(ids)]

    def load_all(self, sid: str) -> list:
        return self.run(self.svc.get_session(app_name="bench", user_id=USER, session_id=sid)).events

    def load_tail(self, sid: str, n: int) -> list:
        from google.adk.sessions.base_session_service import GetSessionConfig

        cfg = GetSessionConfig(num_recent_events=n)
        return self.run(self.svc.get_session(app_name="bench", user_id=USER, session_id=sid, config=cfg)).events

    def close(self) -> None:
        self.run(self.svc.close())


def start_peers(kwargs: dict, databases: dict, loop) -> tuple[dict, dict]:
    """The peers that start on this server, and the error of each that does not."""
    made, failed = {}, {}
    for key, factory in (
        ("langgraph", lambda: LangGraphPeer(kwargs, databases["langgraph"])),
        ("openai-agents", lambda: OpenAIAgentsPeer(kwargs, databases["openai-agents"], loop)),
        ("google-adk", lambda: ADKPeer(kwargs, databases["google-adk"], loop)),
    ):
        try:
            made[key] = factory()
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            failed[key] = f"{type(exc).__name__}: {exc}"[:500]
    return made, failed


def check_peer(peer, sid: str, msgs: list) -> Optional[str]:
    """A tiny smoke test: seed, append, load back. Returns the error text or None."""
    try:
        items = peer.convert(msgs)
        peer.seed(sid, items[:-1])
        if hasattr(peer, "append"):
            peer.append(sid, items[-1:])
        else:
            peer.write_list(sid, items)
        got = peer.load_all(sid)
        if len(got) != len(msgs):
            return f"loaded {len(got)} items after writing {len(msgs)}"
        return None
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"[:500]
