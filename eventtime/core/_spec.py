"""Reading the spec's JSON objects (:meth:`EngineConfig.from_spec`, ``WindowAssigner.from_dict``):
unknown and missing fields and non-integer milliseconds are refused, naming the field."""

from __future__ import annotations

from typing import Any, Iterable

_ABSENT = object()


def spec_fields(data: Any, where: str, required: Iterable[str] = (), optional: Iterable[str] = ()) -> dict:
    """``data`` when it is a dict with every ``required`` field and no field outside both lists.

    >>> spec_fields({"type": "session"}, "window", required=("type", "gap_ms"))
    Traceback (most recent call last):
    ValueError: window.gap_ms is required
    """
    required, optional = tuple(required), tuple(optional)
    if not isinstance(data, dict):
        raise TypeError(f"{where} must be a dict (a JSON object), got {type(data).__name__} {data!r}")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}; allowed: {sorted(required + optional)}")
    for name in required:
        if name not in data:
            raise ValueError(f"{where}.{name} is required")
    return data


def spec_ms(data: dict, name: str, where: str, default: Any = _ABSENT) -> Any:
    """``data[name]`` as integer milliseconds (``default`` when absent; ``None`` passes through).

    >>> spec_ms({"gap_ms": "10s"}, "gap_ms", "window")
    Traceback (most recent call last):
    TypeError: window.gap_ms must be an integer number of milliseconds, got '10s'
    """
    value = data.get(name, default)
    if value is _ABSENT:
        raise ValueError(f"{where}.{name} is required")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{where}.{name} must be an integer number of milliseconds, got {value!r}")
    return value
