"""EXPERIMENT (not part of make bench): what building ADK ``Event`` objects costs by itself, for
the 1 000 events of the adapters benchmark's session (~400-character texts), by every route
pydantic offers from stored JSON: ``orjson.loads`` + ``Event.model_validate`` per row, one
``orjson.loads`` of the whole array + ``model_validate`` per event, ``model_validate_json``
per row, ``TypeAdapter(list[Event]).validate_json`` of the whole array. Medians of 5 calls.
Compare with the adapters benchmark's ``DatabaseSessionService`` turn (docs/adk.md).

    .venv/bin/python benchmarks/experiments/adk_validate.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid

import orjson
from google.adk.events import Event
from google.genai import types
from pydantic import TypeAdapter


def main(n: int = 1000) -> None:
    events = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "model"
        events.append(Event(id=str(uuid.uuid4()), invocation_id="inv", author=role,
                            content=types.Content(role=role, parts=[types.Part(text=f"message {i} " + "x" * 400)])))
    texts = [orjson.dumps(e.model_dump(exclude_none=True, mode="json")) for e in events]
    blob = b"[" + b",".join(texts) + b"]"
    adapter = TypeAdapter(list[Event])
    routes = {
        "orjson.loads + model_validate, per row": lambda: [Event.model_validate(orjson.loads(t)) for t in texts],
        "orjson.loads of the array + model_validate": lambda: [Event.model_validate(d) for d in orjson.loads(blob)],
        "model_validate_json, per row": lambda: [Event.model_validate_json(t) for t in texts],
        "TypeAdapter(list[Event]).validate_json of the array": lambda: adapter.validate_json(blob),
    }
    want = routes["orjson.loads + model_validate, per row"]()
    for name, fn in routes.items():
        assert fn() == want, name
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        print(f"{name}: {1e3 * statistics.median(times):.1f} ms for {n} events")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
