"""A model-checked store: random operation sequences against a plain in-memory model.

After every step the store and the model must agree, and the raw table must hold exactly
what the model says: list rows ``0..n-1``, one hash row per list, no row in a namespace
that was never written. Ids come from a deliberately nasty alphabet.
"""

from __future__ import annotations

import copy
import os
import uuid

import hypothesis.strategies as st
import orjson
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mysql_state import UNVERSIONED, CorruptStateError, MysqlAgentStateStore

from .conftest import Raw, connect

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "60"))
STEPS = int(os.environ.get("MODEL_STEPS", "50"))

NASTY = [
    "a", "A", "ab", "aB", "Ab", "a_b", "a%b", "a\\b", "o'brien", 'say "hi"', "x;y", "--", "/*", "*/",
    "trail ", "trail", " lead", "😀", "𝔘𝔫𝔦", "用户", "会话一", "\x00nul", "tab\t", "é", "e\u0301",
    "l" * 120, "ﬀ", "ß", "SS", "İ", "i",
]
USER_POOL = [None, ""] + [u for u in NASTY if ":" not in u]
SESSION_POOL = [s for s in NASTY if s.strip()] + ["s:with:colons"]
VALUE_KEY_POOL = ["v", "V", "v ", "值", "v%", "v_"] + NASTY[:6]
LIST_KEY_POOL = ["m", "M", "m ", "记忆", "m_", "m%"] + NASTY[6:12]
# Each run draws a few ids from the pools (so operations revisit the same lists), and the
# rules pick among them by index.
users = sessions = value_keys = list_keys = st.integers(0, 1)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=20)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
messages = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "text": st.text(max_size=40)})

STATS = {"runs": 0, "steps": 0, "checks": 0}
KINDS: dict = {}  # "<edit>-><kind of save>" -> count, to show which paths the runs took


def norm_user(u):
    return "__anon__" if u is None or not u.strip() else u


class StoreMachine(RuleBasedStateMachine):
    url: str

    def __init__(self) -> None:
        super().__init__()
        self.database = "m_" + uuid.uuid4().hex[:12]
        self.store = MysqlAgentStateStore.from_url(self.url, database_name=self.database, create_if_not_exist=True)
        self.raw = Raw(self.url, self.database)
        # model: (user, session) -> {"values": {key: (value, version)}, "lists": {key: [items]}}
        self.model: dict = {}
        # the live lists the "agent" mutates in place between saves (not copies)
        self.live: dict = {}
        STATS["runs"] += 1

    def teardown(self) -> None:
        self.store.close()
        self.raw.execute(f"DROP DATABASE `{self.database}`")
        self.raw.close()

    @initialize(data=st.data())
    def pick_ids(self, data):
        pick = lambda pool: data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))  # noqa: E731
        self.ids = {"u": pick(USER_POOL), "s": pick(SESSION_POOL), "v": pick(VALUE_KEY_POOL),
                    "m": pick(LIST_KEY_POOL)}
        if norm_user(self.ids["u"][0]) == norm_user(self.ids["u"][1]):  # None and "" are one user
            self.ids["u"][1] = "second"

    def resolve(self, u, s, k=None, kind="v"):
        return self.ids["u"][u], self.ids["s"][s], (self.ids[kind][k] if k is not None else None)

    def slot(self, u, s):
        return self.model.setdefault((norm_user(u), s), {"values": {}, "lists": {}})

    # ---- writes --------------------------------------------------------------------------------

    @rule(u=users, s=sessions, k=value_keys, v=json_values)
    def save(self, u, s, k, v):
        u, s, k = self.resolve(u, s, k, "v")
        self.store.save(u, s, k, v)
        values = self.slot(u, s)["values"]
        values[k] = (copy.deepcopy(v), values.get(k, (None, 0))[1] + 1)

    @rule(u=users, s=sessions, k=value_keys, v=json_values, stale=st.booleans())
    def cas(self, u, s, k, v, stale):
        u, s, k = self.resolve(u, s, k, "v")
        values = self.slot(u, s)["values"]
        current = values.get(k, (None, 0))[1]
        expected = current + 1 if stale else current
        got = self.store.save_if_version(u, s, k, v, expected)
        if stale:
            assert got == UNVERSIONED
        else:
            assert got == current + 1
            values[k] = (copy.deepcopy(v), got)

    @rule(u=users, s=sessions, k=list_keys, data=st.data())
    def save_list(self, u, s, k, data):
        u, s, k = self.resolve(u, s, k, "m")
        live = self.live.setdefault((norm_user(u), s, k), [])
        op = data.draw(st.sampled_from(["append", "edit_middle", "same_size", "grow_last", "shrink", "clear", "same"]))
        if op == "append" or not live:
            live.extend(data.draw(st.lists(messages, min_size=1, max_size=4)))
        elif op == "edit_middle":
            live[data.draw(st.integers(0, len(live) - 1))]["text"] = data.draw(st.text(max_size=10))
        elif op == "same_size":  # a change that keeps every length (and the JSON's size)
            item = live[data.draw(st.integers(0, len(live) - 1))]
            item["role"] = {"user": "USER", "USER": "user"}.get(item["role"], item["role"][::-1])
        elif op == "grow_last":
            live[-1]["text"] += data.draw(st.text(min_size=1, max_size=10))  # in place
        elif op == "shrink":
            del live[data.draw(st.integers(0, len(live) - 1)) :]
        elif op == "clear":
            live.clear()
        kind = self.store.save_list_report(u, s, k, live).kind
        KINDS[f"{op}->{kind}"] = KINDS.get(f"{op}->{kind}", 0) + 1
        self.slot(u, s)["lists"][k] = copy.deepcopy(live)

    @rule(u=users, s=sessions, k=list_keys, items=st.lists(messages, max_size=3))
    def append_list(self, u, s, k, items):
        u, s, k = self.resolve(u, s, k, "m")
        n = self.store.append_list(u, s, k, items)
        lists = self.slot(u, s)["lists"]
        if items or k in lists:
            lists.setdefault(k, []).extend(copy.deepcopy(items))
        self.live.setdefault((norm_user(u), s, k), []).extend(copy.deepcopy(items))
        assert n == len(lists.get(k, []))

    @rule(u=users, s=sessions)
    def delete_session(self, u, s):
        u, s, _ = self.resolve(u, s)
        self.store.delete(u, s)
        self.model.pop((norm_user(u), s), None)
        for key in [x for x in self.live if x[:2] == (norm_user(u), s)]:
            del self.live[key]

    @rule(u=users, s=sessions, k=value_keys, kind=st.sampled_from("vm"))
    def delete_key(self, u, s, k, kind):
        u, s, k = self.resolve(u, s, k, kind)
        self.store.delete(u, s, k)
        slot = self.slot(u, s)
        slot["values"].pop(k, None)
        slot["lists"].pop(k, None)
        self.live.pop((norm_user(u), s, k), None)

    @rule(u=users, s=sessions, k=list_keys, data=st.data())
    def damaged_row(self, u, s, k, data):
        """A row deleted behind the store's back: reads refuse to disagree with the hash row
        (CorruptStateError), and a save of the whole list repairs it."""
        u, s, k = self.resolve(u, s, k, "m")
        items = self.model.get((norm_user(u), s), {"lists": {}})["lists"].get(k)
        if not items:
            return
        lost = data.draw(st.integers(0, len(items) - 1))
        self.raw.execute("DELETE FROM {t} WHERE session_id = %s AND state_key = %s AND item_index = %s",
                         (f"{norm_user(u)}:{s}", k, lost))
        with pytest.raises(CorruptStateError):
            self.store.get_list(u, s, k)
        kind = self.store.save_list_report(u, s, k, items).kind
        KINDS[f"damaged->{kind}"] = KINDS.get(f"damaged->{kind}", 0) + 1

    @rule(u=st.sampled_from(["has:colon", "__anon__"]), s=sessions)
    def bad_user_is_refused(self, u, s):
        s = self.ids["s"][s]
        with pytest.raises(ValueError):
            self.store.save(u, s, "v", 1)

    # ---- reads (each checked against the model) --------------------------------------------------

    @rule(u=users, s=sessions, k=list_keys, offset=st.integers(-8, 8), limit=st.one_of(st.none(), st.integers(0, 5)))
    def window(self, u, s, k, offset, limit):
        u, s, k = self.resolve(u, s, k, "m")
        expected = self.model.get((norm_user(u), s), {"lists": {}})["lists"].get(k, [])
        expected = expected[offset:] if offset < 0 else expected[offset:]
        if limit is not None:
            expected = expected[:limit]
        assert self.store.get_list(u, s, k, offset=offset, limit=limit) == expected

    @rule(u=users, s=sessions, k=value_keys)
    def versioned(self, u, s, k):
        u, s, k = self.resolve(u, s, k, "v")
        expected = self.model.get((norm_user(u), s), {"values": {}})["values"].get(k, (None, 0))
        assert tuple(self.store.get_versioned(u, s, k)) == expected

    # ---- invariants after every step -----------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self):
        STATS["steps"] += 1
        users_seen = {}
        for (user, s), slot in self.model.items():
            u = None if user == "__anon__" else user
            for k, (v, version) in slot["values"].items():
                assert self.store.get_versioned(u, s, k) == (v, version)
            for k, items in slot["lists"].items():
                assert self.store.get_list(u, s, k) == items
                assert self.store.list_length(u, s, k) == len(items)
            has_rows = bool(slot["values"] or slot["lists"])
            assert self.store.exists(u, s) == has_rows
            if has_rows:
                users_seen.setdefault(user, set()).add(s)
            STATS["checks"] += 1
        for user, expected in users_seen.items():
            assert self.store.list_session_ids(None if user == "__anon__" else user) == expected

    @invariant()
    def raw_table_is_exactly_the_model(self):
        rows = self.raw.rows()
        expected = set()
        for (user, s), slot in self.model.items():
            sid = f"{user}:{s}"
            for k, (v, version) in slot["values"].items():
                expected.add((sid, k, 0, orjson.dumps(v).decode(), version))
            for k, items in slot["lists"].items():
                for i, item in enumerate(items):
                    expected.add((sid, k, i, orjson.dumps(item).decode()))
                expected.add((sid, k + ":_hash", 0))
        got = set()
        for sid, key, index, data, version in rows:
            if key.endswith(":_hash"):
                got.add((sid, key, index))
            elif any(key in slot["lists"] for (user, s), slot in self.model.items() if f"{user}:{s}" == sid):
                got.add((sid, key, index, data))
            else:
                got.add((sid, key, index, data, version))
        assert got == expected
        assert len(rows) == len(expected)  # no duplicate keys hiding behind a collation


def test_store_matches_model(url, report):
    from hypothesis.stateful import run_state_machine_as_test

    StoreMachine.url = url
    run_state_machine_as_test(StoreMachine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, suppress_health_check=list(HealthCheck)))
    report(f"model check: {STATS['runs']} runs (max_examples={EXAMPLES}, {STEPS} steps each), "
           f"{STATS['steps']} steps, {STATS['checks']} session comparisons, store == model after every step; saves by edit and path: {dict(sorted(KINDS.items()))}")
