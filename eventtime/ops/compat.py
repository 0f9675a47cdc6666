"""Restart compatibility: refuse to resume a checkpoint whose state means something else.

The state kept in a checkpoint is laid out by the window grid, the key columns, the
aggregations, the lateness, the accumulation and the emit mode. Resuming with any of those
changed would silently produce wrong panes, so the engine stores a fingerprint beside the
checkpoint and compares it at start. Changing the out-of-orderness, the validity bounds, the
alert thresholds or the Sentry DSN is allowed: they only affect records not yet seen.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence

from ..core.config import EngineConfig
from ..core.kinds import SQL_AGGREGATE
from ..core.window import Session

__all__ = ["IncompatibleRestartError", "CheckpointMissingError", "state_fingerprint", "plan_fingerprint", "changed_fields", "check_and_store"]

FINGERPRINT_FILE = "eventtime-state.json"


class IncompatibleRestartError(RuntimeError):
    """The checkpoint was written with a configuration whose state cannot be reused."""


class CheckpointMissingError(RuntimeError):
    """A query starts without a checkpoint but its tables already hold rows of the pipeline.

    The checkpoint was deleted or moved: starting anyway would read the source again from
    the beginning under a new query id and write every row a second time.
    """


def state_fingerprint(config: EngineConfig, keys: Sequence[str]) -> dict:
    """The parts of a configuration (:meth:`EngineConfig.to_spec`) that decide the meaning of
    the kept state, in the shape checkpoints have stored since layout 1.

    >>> from eventtime import Tumbling
    >>> state_fingerprint(EngineConfig(Tumbling(60_000)), ["user"])["window"]
    {'type': 'tumbling', 'size_ms': 60000, 'offset_ms': 0}
    """
    spec = config.to_spec()
    return {
        "window": spec["window"],
        "keys": list(keys),
        # a Spark SQL aggregation's expression too (its buffer's layout); built-ins as before
        "aggregations": [[a["kind"], a["name"], a["column"], *([a["expression"]] if a.get("expression") else [])]
                         for a in spec["aggregations"]],
        **{name: spec[name] for name in ("allowed_lateness_ms", "accumulation", "emit")},
        # only when not the default, so that checkpoints written before the option resume
        **({"watermark": config.watermark.mode} if config.watermark.per_partition else {}),
    }


def plan_fingerprint(plan: dict) -> dict:
    """The fingerprint a checkpoint stores, derived from the operator's plan document
    (eventtime/plan.schema.json): :func:`state_fingerprint` of its config and keys, and how
    the state is laid out (its layout and bucket count)."""
    config = EngineConfig.from_spec(plan["config"])
    return {**state_fingerprint(config, plan["keys"]), "layout": plan["run"]["state_layout"],
            "buckets": plan["run"]["buckets"]}


def changed_fields(old: dict, new: dict) -> list[str]:
    """Human-readable ``field: old -> new`` lines for every difference."""
    return [
        f"{name}: {old.get(name)!r} -> {new.get(name)!r}"
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    ]


# What each checkpoint layout changed (the refusal names it).
_LAYOUTS = {
    2: "the query has an end-of-input control source",
    3: "the state is kept per key by the JVM operator; layouts 1 and 2 held pickled frames per hash bucket",
    4: "the JVM operator's state is grouped by one int per hash bucket (layout 3: two ints), which Spark sorts "
       "without comparing rows",
    5: "the JVM operator's grouping key of each hash bucket is an id that Spark's hash partitioning sends to "
       "partition bucket mod P (layout 4: the bucket's number, which put 20 of the 32 buckets in one of 2 partitions)",
    6: "a Spark SQL or Python aggregation's buffers of fixed windows are kept per slice, apart from the key's state",
}


def _keeps_state(layout: int, fingerprint: dict) -> bool:
    """Whether a checkpoint of this fingerprint holds the same state bytes before and after ``layout``."""
    if layout == 6:
        # (a Python aggregation runs on the engine as a Spark SQL one: its kind here is sql)
        return fingerprint["window"]["type"] == Session.TYPE or all(a[0] != SQL_AGGREGATE for a in fingerprint["aggregations"])
    return False


def _same_state(old, new, fingerprint: dict) -> bool:
    """Whether a checkpoint written at layout ``old`` is read the same way at layout ``new``."""
    return isinstance(old, int) and isinstance(new, int) and old < new and all(
        _keeps_state(n, fingerprint) for n in range(old + 1, new + 1))


def check_and_store(checkpoint_dir: str, fingerprint: dict) -> Optional[dict]:
    """Compare with the fingerprint stored in ``checkpoint_dir``; store it when absent.

    Returns the stored fingerprint (``None`` on a fresh checkpoint). Raises
    :class:`IncompatibleRestartError` naming every changed field.
    """
    path = os.path.join(checkpoint_dir, FINGERPRINT_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
        changes = [c for c in changed_fields(stored, fingerprint) if not c.startswith("layout: ")]
        if stored.get("layout") != fingerprint.get("layout") and \
                not _same_state(stored.get("layout", 1), fingerprint.get("layout"), fingerprint):
            old, new = stored.get("layout", 1), fingerprint.get("layout")
            changed = "; ".join(f"layout {n}: {_LAYOUTS[n]}" for n in sorted(_LAYOUTS) if old < n <= new) \
                if isinstance(old, int) and isinstance(new, int) and old < new else "a different state layout"
            raise IncompatibleRestartError(
                f"checkpoint {checkpoint_dir} was written by another eventtime version (checkpoint layout "
                f"{old}, this version writes layout {new}; {changed}). Its state cannot be migrated: "
                "let the old version finish the input (route(...).start(..., end_of_input=True) fires and purges every "
                "window), or start this version from a new checkpoint (with fresh_start=True over the same tables)."
            )
        if changes:
            raise IncompatibleRestartError(
                f"checkpoint {checkpoint_dir} was written with a different configuration; "
                f"its state cannot be reused. Changed: {'; '.join(changes)}. "
                "Restore the old configuration, or start from a new checkpoint (and new tables) explicitly."
            )
        return stored
    os.makedirs(checkpoint_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(fingerprint, handle, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return None


ENDED_FILE = "eventtime-end-of-input"


def mark_ended(checkpoint_dir: str) -> None:
    """Record that this checkpoint's query reached the end of its input (every window fired)."""
    with open(os.path.join(checkpoint_dir, ENDED_FILE), "w", encoding="utf-8") as handle:
        handle.write("every window was fired and purged at the end of input\n")


def check_not_ended(checkpoint_dir: str) -> None:
    """Refuse to resume a query whose input already ended: its windows fired as final."""
    if os.path.exists(os.path.join(checkpoint_dir, ENDED_FILE)):
        raise IncompatibleRestartError(
            f"checkpoint {checkpoint_dir} belongs to a query that reached the end of its input (end_of_input=True): "
            "every window was fired as final and purged, so new records would open those windows again and "
            "write second final panes. Start the next run from a new checkpoint."
        )
