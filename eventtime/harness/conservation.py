"""Conservation: every input row is counted in a window, late, or invalid — exactly once.

Computed from what users keep — the results table and the late-data table — and the number
of input rows, so it checks the whole pipeline (engine, router and sinks), not the engine
alone. Heartbeat rows are left out on both sides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from ..core.kinds import INVALID_RECORD, LATE_RECORD
from ..core.reconcile import CORRECTION
from ..core.trigger import DISCARDING, FINAL_ONLY
from ..core.window import Tumbling, WindowAssigner

__all__ = ["ConservationReport", "conservation"]


@dataclass(frozen=True)
class ConservationReport:
    rows_in: int
    counted: int
    late: int
    invalid: int
    duplicated_panes: int
    duplicated_records: int

    @property
    def holds(self) -> bool:
        return (
            self.rows_in == self.counted + self.late + self.invalid
            and self.duplicated_panes == 0
            and self.duplicated_records == 0
        )

    def describe(self) -> str:
        verdict = "holds" if self.holds else "DOES NOT HOLD"
        return (
            f"conservation {verdict}: rows in {self.rows_in} = counted {self.counted} + late {self.late} "
            f"+ invalid {self.invalid} (= {self.counted + self.late + self.invalid}); "
            f"duplicated panes {self.duplicated_panes}, duplicated records {self.duplicated_records}"
        )


def _is_heartbeat(payload: object, heartbeat_column: str) -> bool:
    try:
        return bool(json.loads(payload).get(heartbeat_column))  # type: ignore[arg-type]
    except (TypeError, ValueError, AttributeError):
        return False


def conservation(
    rows_in: int,
    panes: pd.DataFrame,
    records: pd.DataFrame,
    key_columns: Sequence[str],
    window: WindowAssigner,
    accumulation: str,
    emit: str,
    count_column: str = "count",
    heartbeat_column: Optional[str] = "heartbeat",
    record_identity: Sequence[str] = ("payload",),
) -> ConservationReport:
    """Count rows in the tables and compare with ``rows_in`` (data rows, heartbeats excluded).

    Needs tumbling windows (a record is in exactly one window) and a ``count()``
    aggregation in the panes; every window must have fired (flush the stream with a
    heartbeat first). ``record_identity`` are the record columns that identify an input row,
    used to find duplicates (the payload holds the whole original row). CORRECTION panes (by
    ``eventtime late reconcile``) are left out: the late records they hold are counted as late.
    """
    if not isinstance(window, Tumbling):
        raise ValueError("conservation from the tables needs tumbling windows: with sliding windows a record is counted in several")
    if len(panes) and count_column not in panes.columns:
        raise ValueError(f"count_column {count_column!r} is not a column of the panes: {list(panes.columns)}")
    group = [*key_columns, "window_start"]
    counted = 0
    duplicated_panes = 0
    if len(panes) and "pane_timing" in panes.columns:
        panes = panes[panes["pane_timing"] != CORRECTION]
    if len(panes):
        duplicated_panes = int(panes.duplicated(subset=[*group, "pane_index"]).sum())
        panes = panes.drop_duplicates(subset=[*group, "pane_index"])
        if emit == FINAL_ONLY or accumulation != DISCARDING:
            last = panes.sort_values("pane_index").groupby(group, dropna=False).tail(1)
            counted = int(last[count_column].sum())
        else:
            counted = int(panes[count_column].sum())
    late = invalid = duplicated_records = 0
    if len(records):
        duplicated_records = int(records.duplicated(subset=list(record_identity)).sum())
        records = records.drop_duplicates(subset=list(record_identity))
        late = int((records["kind"] == LATE_RECORD).sum())
        invalid_rows = records[records["kind"] == INVALID_RECORD]
        if heartbeat_column is not None and len(invalid_rows):
            invalid_rows = invalid_rows[~invalid_rows["payload"].map(lambda p: _is_heartbeat(p, heartbeat_column))]
        invalid = int(len(invalid_rows))
    return ConservationReport(int(rows_in), counted, late, invalid, duplicated_panes, duplicated_records)
