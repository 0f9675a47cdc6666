"""Which windows of a results table are closed: no pane of the stream will change them.

``route`` tells a results sink the watermark each batch ran at, and the sink records it in the
batch's commit (:data:`WATERMARK_METADATA`); :func:`eventtime.sinks.latest_panes` marks a window
closed when its pipeline's recorded watermark has expired it (``is_expired``: ``window_end - 1
+ allowed_lateness <= watermark``, docs/semantics.md).
"""

from __future__ import annotations

from typing import Any

from ..core.trigger import is_expired
from ..core.window import Window

__all__ = ["WATERMARK_METADATA", "recorded_watermarks", "with_closed"]

#: The commit metadata that holds the watermark the batch a results commit wrote ran at.
WATERMARK_METADATA = "eventtime.watermark_ms"


def recorded_watermarks(dt: Any) -> dict[str, int]:
    """``{pipeline: the largest watermark its commits recorded}`` of a Delta table (delta-rs
    commits carry it in their commit info, delta-spark's in its ``userMetadata`` JSON)."""
    import json

    out: dict[str, int] = {}
    for commit in dt.history():
        metadata = dict(commit)
        user = commit.get("userMetadata")
        if isinstance(user, str):
            try:
                metadata.update(json.loads(user))
            except ValueError:
                pass
        pipeline, watermark_ms = metadata.get("eventtime.pipeline"), metadata.get(WATERMARK_METADATA)
        if pipeline is not None and watermark_ms is not None:
            out[pipeline] = max(out.get(pipeline, int(watermark_ms)), int(watermark_ms))
    return out


def with_closed(df: Any, watermarks: dict, documents: dict) -> Any:
    """``df`` (latest panes, pandas) with column ``closed``: whether its pipeline's recorded
    watermark (``watermarks``: :func:`recorded_watermarks`) has expired the window under the
    pipeline's allowed lateness (``documents``: the pipelines' recorded configurations)."""
    lateness = {p: d.get("config", {}).get("allowed_lateness_ms", 0) for p, d in documents.items()}

    def epoch_ms(column: "Any") -> list:
        import pandas as pd

        times = pd.to_datetime(column, utc=True)
        return ((times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(1, "ms")).astype("int64").tolist()

    starts, ends = epoch_ms(df["window_start"]), epoch_ms(df["window_end"])
    df = df.copy()
    df["closed"] = [p in watermarks and is_expired(Window(s, e), watermarks[p], lateness.get(p, 0))
                    for p, s, e in zip(df["pipeline"], starts, ends)]
    return df
