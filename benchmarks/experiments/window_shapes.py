"""EXPERIMENT (not part of make bench): a long window ``get_list(offset=o, limit=l)`` and a
tail ``get_list(offset=-k)`` in the one-column shapes (``SELECT_RANGE_LONG``,
``SELECT_TAIL_LONG``) against the indexed shapes they replaced (``SELECT_WINDOW``,
``SELECT_TAIL``: index, text and a constant a row, the hash row by ``UNION ALL``), same store,
same list, interleaved calls (the order flipped each round), medians; then
``MysqlSaver.get_tuple`` of a 1 000-message thread, which reads its message log as one window,
both ways. The indexed shape is had by raising ``list_read.SHORT_WINDOW`` past every read for
the call: the same code otherwise, which is the comparison wanted (docs/lists.md, "Reads").

    .venv/bin/python benchmarks/experiments/window_shapes.py [ROUNDS]
"""

from __future__ import annotations

import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402

import statistics
import time
from typing import Any, Callable

import data
from mysql_state import MysqlAgentStateStore, list_read

DB = "msbench_windows"
SHORT_ONLY = 10**9  # a SHORT_WINDOW no read passes: the indexed shape
ALL_ONE_COLUMN = 0  # every window and tail in one column, whatever its size


def both_ways(rounds: int, call: Callable[[], Any]) -> tuple[float, float]:
    """Median seconds of ``call`` in the one-column shape and in the indexed one (whatever the
    read's size: the threshold itself is what this measures)."""
    default = list_read.SHORT_WINDOW
    got: dict = {ALL_ONE_COLUMN: [], SHORT_ONLY: []}
    try:
        for i in range(rounds):
            for threshold in ((ALL_ONE_COLUMN, SHORT_ONLY) if i % 2 else (SHORT_ONLY, ALL_ONE_COLUMN)):
                list_read.SHORT_WINDOW = threshold
                start = time.perf_counter()
                call()
                got[threshold].append(time.perf_counter() - start)
    finally:
        list_read.SHORT_WINDOW = default
    return statistics.median(got[ALL_ONE_COLUMN]), statistics.median(got[SHORT_ONLY])


def saver_load(url: str, rounds: int) -> None:
    try:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.base import empty_checkpoint

        from mysql_state.langgraph import MysqlSaver
    except ImportError:
        print("MysqlSaver.get_tuple: skipped (the langgraph extra is not installed)")
        return
    with MysqlSaver.from_url(url, database_name=DB, create_if_not_exist=True) as saver:
        messages = []
        for i in range(500):
            messages += [HumanMessage(content=f"({i}) hello", id=f"h-{i}"),
                         AIMessage(content=f"[{i}] " + "x" * 330, id=f"ai-{i}")]
        ck = empty_checkpoint()
        ck["channel_values"] = {"messages": messages}
        ck["channel_versions"] = {"messages": saver.get_next_version(None, None)}
        conf = {"configurable": {"thread_id": "windows", "checkpoint_ns": ""}}
        saver.put(conf, ck, {"source": "input", "step": 0}, dict(ck["channel_versions"]))
        one, indexed = both_ways(rounds, lambda: saver.get_tuple(conf))
        print(f"MysqlSaver.get_tuple, 1 000 messages: one column {one * 1e3:.2f} ms, indexed "
              f"{indexed * 1e3:.2f} ms: {one / indexed:.2f}x")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 80
    url, _ = harness.server()
    print(f"{rounds} interleaved rounds ({harness.loadavg_text()})")
    with MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True, pool_size=4) as store:
        for n, offset, limit in ((1000, 0, 1000), (1000, 500, 400), (300, 0, 200), (10_000, 9_000, 1_000),
                                 (1000, 500, 10), (1000, 500, 50), (1000, 0, 100)):
            sid = f"windows-{n}"
            store.save_list("u", sid, "m", data.Conversation(n).base)
            one, indexed = both_ways(rounds, lambda: store.get_list("u", sid, "m", offset=offset, limit=limit))
            print(f"window [{offset}, {offset + limit}) of {n} items: one column {one * 1e3:.2f} ms, "
                  f"indexed {indexed * 1e3:.2f} ms: {one / indexed:.2f}x")
        sid = "windows-1000"
        for count in (1, 5, 20, 32, 50, 64, 100, 1000):
            one, indexed = both_ways(rounds, lambda: store.get_list("u", sid, "m", offset=-count))
            print(f"tail of {count} of 1000 items: one column {one * 1e3:.3f} ms, indexed {indexed * 1e3:.3f} ms: "
                  f"{one / indexed:.2f}x")
    saver_load(url, rounds // 2)
    print(f"done ({harness.loadavg_text()})")


if __name__ == "__main__":
    main()
