"""Pure answers of :class:`~mysql_state.langgraph.MysqlStore`: filters, namespace matching and
vector ranking, written to give what LangGraph's ``InMemoryStore`` (langgraph-checkpoint 4.3.2)
gives for the same items in the same order, scores included.

>>> compare_values({"n": 3}, {"n": {"$gte": 2}})
True
>>> does_match("prefix", ("a", "*"), ("a", "b", "c"))
True
"""

from __future__ import annotations

import functools
import importlib.util
import math
from typing import Any, Callable, Optional, Sequence

from .. import serde

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def check_filter(filter: Any) -> None:
    """Refuse, before any SQL, a filter that is not a dict or names an unknown ``$`` operator.
    Read as :func:`compare_values` reads it: the filter's own keys are field names (``"$schema"``
    too), a dict value with a ``$`` key is an operator dict, whose operands are values (never
    operators), another dict value names nested fields.

    >>> check_filter({"$schema": "v1", "meta": {"$eq": {"$ref": "x"}}})
    >>> check_filter({"n": {"$near": 1}})
    Traceback (most recent call last):
    ...
    ValueError: Unsupported operator: $near (filter {'n': {'$near': 1}}; supported: $eq, $ne, $gt, $gte, $lt, $lte)
    """
    if filter is None:
        return
    if not isinstance(filter, dict):
        raise TypeError(f"filter must be a dict of field to value, got {type(filter).__name__}: {filter!r}")

    def walk(f: Any) -> None:
        if isinstance(f, dict):
            if any(isinstance(k, str) and k.startswith("$") for k in f):
                for k in f:
                    if k not in OPERATORS:
                        raise ValueError(f"Unsupported operator: {k} (filter {filter!r}; supported: "
                                         f"{', '.join(OPERATORS)})")
                return
            for v in f.values():
                walk(v)
        elif isinstance(f, (list, tuple)):
            for v in f:
                walk(v)

    for v in filter.values():
        walk(v)


_JSON_LEAVES = (str, bool, int, float, type(None))
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes


def _not_utf8(text: str) -> bool:
    """Whether a str holds a lone surrogate (no UTF-8 for it: JSON in the table cannot hold it)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


#: The deepest a put's value may nest (the value itself is level 1): orjson writes
#: ``serde.MAX_DEPTH`` levels of arrays and objects, and the stored row wraps the value in one more.
MAX_VALUE_DEPTH = serde.MAX_DEPTH - 1


def not_json(value: Any, path: str = "", depth: int = 1) -> Optional[str]:
    """What in ``value`` JSON does not hold as given, as its field path and type, or None:
    dicts with ``str`` keys (exactly ``str``), lists, tuples (not their subclasses, such as a
    namedtuple), strings (valid Unicode: no lone surrogate), booleans, integers within 64 bits
    and finite ``float`` s (exactly ``float``: a subclass such as ``numpy.float64`` is not
    written), nested at most :data:`MAX_VALUE_DEPTH` levels. Checked before any SQL, so a put
    refused writes nothing and the batch reads (or refreshes) nothing either.

    >>> import datetime
    >>> not_json({"a": [1, {"when": datetime.date(2024, 1, 2)}]}), not_json({"n": 2**70}), not_json({"k": [1.5]})
    ("field 'a.1.when' is a date", "field 'n' is an integer past 64 bits", None)
    >>> not_json({"x": [float("nan")]}), not_json({"t": "a\\ud800"})
    ("field 'x.0' is nan, which JSON has not", "field 't' is a str with a lone surrogate (not valid Unicode)")
    >>> class Score(float): pass
    >>> not_json({"meta": {"score": Score(0.5)}})
    "field 'meta.score' is a Score, a float subclass (store float(x))"
    """
    if isinstance(value, _JSON_LEAVES):
        if isinstance(value, int) and not isinstance(value, bool) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return f"field {path!r} is an integer past 64 bits"
        if isinstance(value, float):
            if type(value) is not float:
                return f"field {path!r} is a {type(value).__name__}, a float subclass (store float(x))"
            if not math.isfinite(value):
                return f"field {path!r} is {value!r}, which JSON has not"
        if isinstance(value, str) and _not_utf8(value):
            return f"field {path!r} is a str with a lone surrogate (not valid Unicode)"
        return None
    if isinstance(value, (dict, list, tuple)) and depth > MAX_VALUE_DEPTH:
        return f"field {path!r} nests deeper than {MAX_VALUE_DEPTH} levels of objects and arrays"
    if isinstance(value, dict):
        for k, v in value.items():
            if type(k) is not str:
                return f"field {path!r} has a key that is not a str: {type(k).__name__} {k!r}"[:200]
            if _not_utf8(k):
                return f"field {path!r} has a key with a lone surrogate (not valid Unicode): {k!r}"[:200]
            found = not_json(v, f"{path}.{k}" if path else k, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        if isinstance(value, tuple) and type(value) is not tuple:
            return f"field {path!r} is a {type(value).__name__}, a tuple subclass (store list(x) or a dict)"
        for i, v in enumerate(value):
            found = not_json(v, f"{path}.{i}" if path else str(i), depth + 1)
            if found is not None:
                return found
        return None
    return f"field {path!r} is a {type(value).__name__}"


def matches(value: dict, filter: Optional[dict]) -> bool:
    """Whether an item's value passes ``search(filter=...)``: every field compared as
    :func:`compare_values` does."""
    return not filter or all(compare_values(value.get(k), fv) for k, fv in filter.items())


def compare_values(item_value: Any, filter_value: Any) -> bool:
    """InMemoryStore's comparison: a dict with ``$`` keys applies operators, another dict
    matches nested fields, a list matches element-wise, anything else by equality."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(apply_operator(item_value, op, v) for op, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(compare_values(iv, fv) for iv, fv in zip(item_value, filter_value))
        )
    return item_value == filter_value


def apply_operator(value: Any, operator: str, op_value: Any) -> bool:
    """One comparison operator; the ordering ones compare as floats (as InMemoryStore does)."""
    if operator == "$eq":
        return value == op_value
    if operator == "$ne":
        return value != op_value
    if operator == "$gt":
        return float(value) > float(op_value)
    if operator == "$gte":
        return float(value) >= float(op_value)
    if operator == "$lt":
        return float(value) < float(op_value)
    if operator == "$lte":
        return float(value) <= float(op_value)
    raise ValueError(f"Unsupported operator: {operator}")


def does_match(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """A ``list_namespaces`` condition: ``path`` a prefix (or suffix) of ``namespace``, label
    by label, ``"*"`` matching any one label."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"Unsupported match type: {match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def literal_prefix(path: Sequence[str]) -> tuple[str, ...]:
    """The labels of a prefix condition before its first wildcard: the key range to read."""
    out = []
    for label in path:
        if label == "*":
            break
        out.append(label)
    return tuple(out)


def list_namespaces(namespaces: Sequence[tuple[str, ...]], conditions: Sequence[tuple[str, Sequence[str]]],
                    max_depth: Optional[int], limit: int, offset: int) -> list[tuple[str, ...]]:
    """``list_namespaces`` over the namespaces that hold items: matched, cut to ``max_depth``,
    de-duplicated, sorted, then ``[offset:offset + limit]``."""
    found = [ns for ns in namespaces if all(does_match(t, p, ns) for t, p in conditions)]
    if max_depth is not None:
        found = sorted({ns[:max_depth] for ns in found})
    else:
        found = sorted(set(found))
    return found[offset : offset + limit]


@functools.lru_cache(maxsize=1)
def _numpy() -> Any:
    return importlib.import_module("numpy") if importlib.util.find_spec("numpy") else None


def cosine_similarity(x: Sequence[float], ys: Sequence[Sequence[float]]) -> list[float]:
    """Cosine similarity of ``x`` with each of ``ys``, computed as InMemoryStore computes it
    (with NumPy when it is installed, the same pure-Python sums otherwise), so scores agree."""
    if not ys:
        return []
    np = _numpy()
    if np is not None:
        xa, ya = np.array(x), np.array(ys)
        x_norm, y_norm = np.linalg.norm(xa), np.linalg.norm(ya, axis=1)
        mask = y_norm != 0
        out = np.zeros_like(y_norm)
        out[mask] = np.dot(ya[mask], xa) / (y_norm[mask] * x_norm)
        return out.tolist()
    scores = []
    for y in ys:
        dot = sum(a * b for a, b in zip(x, y))
        n1, n2 = sum(a * a for a in x) ** 0.5, sum(a * a for a in y) ** 0.5
        scores.append(dot / (n1 * n2) if n1 > 0 and n2 > 0 else 0.0)
    return scores


def rank(query_vector: Sequence[float], candidates: Sequence[tuple[Any, Sequence[Sequence[float]]]],
         limit: int, offset: int, ident: Callable[[Any], Any]) -> list[tuple[Optional[float], Any]]:
    """``search(query=...)``: candidates (in listing order, each with its vectors) ranked by
    their best vector's similarity (max pooling), ``[offset:offset + limit]``, then items with
    no vector (unscored) filling what ``limit`` leaves, as InMemoryStore does."""
    flat_items, flat_vectors, scoreless = [], [], []
    for item, vectors in candidates:
        for v in vectors:
            flat_items.append(item)
            flat_vectors.append(v)
        if not vectors:
            scoreless.append(item)
    scores = cosine_similarity(query_vector, flat_vectors)
    ordered = sorted(zip(scores, flat_items), key=lambda x: x[0], reverse=True)
    seen: set = set()
    kept: list[tuple[Optional[float], Any]] = []
    for score, item in ordered:
        k = ident(item)
        if k in seen:
            continue
        ix = len(seen)
        seen.add(k)
        if ix >= offset + limit:
            break
        if ix < offset:
            continue
        kept.append((float(score), item))
    if scoreless and len(kept) < limit:
        kept.extend((None, item) for item in scoreless[: limit - len(kept)])
    return kept
