"""Scenario files: the input and output contract of ``eventtime replay``.

A scenario describes one windowed aggregation (count and sum of ``value`` per ``key``) and
a sequence of micro-batches; the output has one entry per batch. See docs/replay.md.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any, Optional

from ..core import aggregations as agg
from ..core._duration import event_zone
from ..core.config import EngineConfig
from ..core.reference import BatchResult, Pane, Record, ReferenceEngine
from ..core.trigger import END_OF_INPUT_MS
from ..core.watermark import WatermarkPolicy
from ..core.window import WindowAssigner

__all__ = ["Scenario", "load_scenario", "parse_scenario", "render_batch", "run_reference", "normalise_output"]

_TOP_FIELDS = {
    "window",
    "report_partly_late",
    "max_out_of_orderness_ms",
    "allowed_lateness_ms",
    "accumulation",
    "emit",
    "min_valid_ms",
    "max_future_ms",
    "now_ms",
    "tz",
    "watermark",
    "batch_interval_ms",
    "batches",
}
_RECORD_FIELDS = {"key", "ts", "value", "heartbeat", "partition"}
SCENARIO_AGGREGATIONS = (agg.count("count"), agg.sum("value", name="sum"))


class ScenarioError(ValueError):
    """A scenario file that does not follow the contract; the message names the field."""


@dataclass(frozen=True)
class Scenario:
    config: EngineConfig
    batches: tuple[tuple[Record, ...], ...]
    now_ms: int
    tz: Optional[str] = None  # zone of string timestamps without an offset (UTC when None)
    #: Batch ``i`` is processed at ``now_ms + i * batch_interval_ms`` (idleness); the
    #: timestamp checks use ``now_ms`` in every batch.
    batch_interval_ms: int = 1000

    def __post_init__(self) -> None:
        event_zone(self.tz)  # TypeError / ValueError naming "tz"

    def processing_time_ms(self, index: int) -> int:
        return self.now_ms + index * self.batch_interval_ms


def _check_fields(obj: Any, allowed: set, where: str) -> None:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where} must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ScenarioError(f"{where} has unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _window(spec: Any) -> WindowAssigner:
    """The scenario's window, read as every spec's window is (``WindowAssigner.from_dict``)."""
    try:
        return WindowAssigner.from_dict(spec)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(str(exc) if str(exc).startswith("window") else f"window: {exc}") from None


def _watermark(spec: Any) -> WatermarkPolicy:
    try:
        return WatermarkPolicy.from_dict(spec)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(str(exc) if str(exc).startswith("watermark.") else f"watermark: {exc}") from None


def parse_scenario(data: Any) -> Scenario:
    """Validate a scenario (parsed JSON) and build its config and records."""
    _check_fields(data, _TOP_FIELDS, "scenario")
    for required in ("window", "batches"):
        if required not in data:
            raise ScenarioError(f"scenario.{required} is required")
    options = {
        name: data[name]
        for name in ("max_out_of_orderness_ms", "allowed_lateness_ms", "accumulation", "emit", "min_valid_ms", "max_future_ms",
                     "report_partly_late")
        if name in data
    }
    for name, value in options.items():
        if name.endswith("_ms") and (isinstance(value, bool) or not isinstance(value, int)):
            raise ScenarioError(f"scenario.{name} must be an integer number of milliseconds, got {value!r}")
    options["watermark"] = _watermark(data.get("watermark"))
    interval = data.get("batch_interval_ms", 1000)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 0:
        raise ScenarioError(f"scenario.batch_interval_ms must be an integer number of milliseconds >= 0, got {interval!r}")
    try:
        config = EngineConfig(_window(data["window"]), SCENARIO_AGGREGATIONS, **options)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"scenario: {exc}") from None
    now_ms = data.get("now_ms")
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    elif isinstance(now_ms, bool) or not isinstance(now_ms, int):
        raise ScenarioError(f"scenario.now_ms must be an integer epoch millisecond, got {now_ms!r}")
    tz = data.get("tz")
    try:
        event_zone(tz, "scenario.tz")
    except (TypeError, ValueError) as exc:
        raise ScenarioError(str(exc)) from None
    if not isinstance(data["batches"], list):
        raise ScenarioError("scenario.batches must be a list of batches (lists of records)")
    batches = []
    for b, batch in enumerate(data["batches"]):
        if not isinstance(batch, list):
            raise ScenarioError(f"scenario.batches[{b}] must be a list of records")
        records = []
        for r, rec in enumerate(batch):
            where = f"scenario.batches[{b}][{r}]"
            _check_fields(rec, _RECORD_FIELDS, where)
            if "ts" not in rec:
                raise ScenarioError(f"{where}.ts is required (it may be null)")
            heartbeat = rec.get("heartbeat", False)
            if not isinstance(heartbeat, bool):
                raise ScenarioError(f"{where}.heartbeat must be true or false, got {heartbeat!r}")
            records.append(
                Record(rec.get("key"), rec["ts"], {"value": rec.get("value")}, heartbeat, rec.get("partition"))
            )
        batches.append(tuple(records))
    return Scenario(config, tuple(batches), now_ms, tz, interval)


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file."""
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{path} is not valid JSON: {exc}") from None
    return parse_scenario(data)


def render_pane(p: Pane, sessions: bool) -> dict:
    """One pane in the replay output format; session panes also say which panes they supersede."""
    out = {
        "key": p.key,
        "window_start": p.window.start_ms,
        "window_end": p.window.end_ms,
        "timing": p.timing,
        "index": p.index,
        "is_final": p.is_final,
        "count": p.values["count"],
        "sum": p.values["sum"],
    }
    if sessions:
        out["merged_from"] = [[w.start_ms, w.end_ms] for w in p.merged_from]
    return out


def render_batch(result: BatchResult, sessions: bool = False) -> dict:
    """One batch's result in the replay output format (``sessions``: with ``merged_from``)."""
    return {
        "watermark_ms": result.watermark_ms,
        "panes": [render_pane(p, sessions) for p in result.panes],
        "late": [
            {
                "key": r.record.key,
                "ts": r.ts_ms,
                "value": r.record.fields.get("value"),
                "reason": r.reason,
                "watermark_ms": r.watermark_ms,
            }
            for r in result.late
        ],
        "invalid": [
            {"key": r.record.key, "ts": r.record.ts, "value": r.record.fields.get("value"), "reason": r.reason}
            for r in result.invalid
        ],
    }


def run_reference(scenario: Scenario, merged_from: bool = False, bounded: bool = False) -> dict:
    """Replay a scenario through the reference model. ``merged_from`` adds that field to session
    panes (the contract's output leaves it out). ``bounded``: every record in one batch that ends
    the input, as a static DataFrame runs (docs/semantics.md, "End of input")."""
    engine = ReferenceEngine(scenario.config, tz=scenario.tz)
    sessions = merged_from and scenario.config.window.merging
    if bounded:
        one = engine.process_batch([r for batch in scenario.batches for r in batch], scenario.now_ms,
                                   scenario.processing_time_ms(0), end_of_input=True)
        return {"batches": [render_batch(dataclasses.replace(one, watermark_ms=END_OF_INPUT_MS), sessions)]}
    return {"batches": [
        render_batch(engine.process_batch(batch, scenario.now_ms, scenario.processing_time_ms(i)), sessions)
        for i, batch in enumerate(scenario.batches)
    ]}


def _sort_key(item: dict) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def normalise_output(output: dict) -> dict:
    """Order-insensitive, int/float-insensitive form of a replay output, for comparison."""
    batches = []
    for batch in output["batches"]:
        norm = {"watermark_ms": batch["watermark_ms"]}
        for part in ("panes", "late", "invalid"):
            rows = [{k: _number(v) for k, v in row.items()} for row in batch[part]]
            norm[part] = sorted(rows, key=_sort_key)
        batches.append(norm)
    return {"batches": batches}


def diff_outputs(expected: dict, actual: dict) -> Optional[str]:
    """A readable description of the first difference, or ``None`` when equal."""
    exp, act = normalise_output(expected), normalise_output(actual)
    if len(exp["batches"]) != len(act["batches"]):
        return f"expected {len(exp['batches'])} batches, got {len(act['batches'])}"
    for i, (e, a) in enumerate(zip(exp["batches"], act["batches"])):
        for part in ("watermark_ms", "panes", "late", "invalid"):
            if e[part] != a[part]:
                return f"batch {i} {part}:\n  expected {json.dumps(e[part], sort_keys=True)}\n  actual   {json.dumps(a[part], sort_keys=True)}"
    return None
