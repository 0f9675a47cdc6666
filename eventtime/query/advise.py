"""The lateness advisor: which ``B`` and ``L`` would have kept a share of the records on time.

The engine records, per batch and source partition, how far behind the running maximum
event time (of the earlier batches) each valid record arrived: its *delay*, as a histogram
(``route(..., delays=DeltaDelaySink(path))``). A record whose delay is below ``B + L`` is never
late: its windows end at or after its own time, and a window expires only once the watermark
(``max - B``) has passed its end by ``L``. So for a target share ``q`` the smallest sufficient
``B + L`` is the ``q``-quantile of the delays, and the advice is on the safe side (a record
further behind may still be on time when its window ends later). The advice is for the
global watermark (``max - B``).

Bins (the JVM's ``Spec.delayBin``): 0 for a delay of 0 or less, the delay itself below 8 ms,
then 8 bins per power of two, so a bin is at most 1/8 of its delay wide.

>>> bin_bounds(delay_bin(1000)), delay_bin(0), delay_bin(7)
((960, 1024), 0, 7)
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Sequence

__all__ = ["delay_bin", "bin_bounds", "Choice", "Advice", "advise", "advise_counts", "plot_delays"]

DEFAULT_TARGETS = (0.99, 0.999, 0.9999)


def delay_bin(delay_ms: int) -> int:
    """The bin of a delay (the same function as the JVM's ``Spec.delayBin``)."""
    if delay_ms <= 0:
        return 0
    if delay_ms < 8:
        return int(delay_ms)
    e = delay_ms.bit_length() - 1
    return 8 * (e - 2) + ((delay_ms >> (e - 3)) & 7)


def bin_bounds(bin_: int) -> tuple[int, int]:
    """``[low, high)`` of a bin in ms (bin 0 holds every delay of 0 or less: ``[0, 1)``)."""
    if bin_ < 8:
        return bin_, bin_ + 1
    e, sub = bin_ // 8 + 2, bin_ % 8
    return (8 + sub) << (e - 3), (9 + sub) << (e - 3)


@dataclass(frozen=True)
class Choice:
    """One way to reach a target: ``B`` and ``L``, the records still late at most, and the
    extra state: each window held ``extra_hold_ms`` longer (event time) than today, and
    ``extra_window_ms`` = windows x that, when the results table was given."""

    target: float
    b_ms: int
    l_ms: int
    still_late: int
    extra_hold_ms: int
    extra_window_ms: Optional[int]


@dataclass(frozen=True)
class Advice:
    records: int
    current_b_ms: Optional[int]
    current_l_ms: Optional[int]
    #: records whose delay is at least the current B + L (the ones that can be late today)
    current_at_risk: Optional[int]
    windows: Optional[int]
    choices: tuple[Choice, ...]
    #: the histogram, ``{bin: records}``, with the bins' bounds (for a plot or a script)
    histogram: Mapping[int, int]

    def to_json(self) -> dict:
        out = asdict(self)
        out["histogram"] = [{"bin": b, "low_ms": bin_bounds(b)[0], "high_ms": bin_bounds(b)[1], "records": n}
                            for b, n in sorted(self.histogram.items())]
        return out

    def describe(self) -> str:
        lines = [f"delays of {self.records} valid record(s) behind the running maximum event time"]
        if self.current_b_ms is not None:
            lines.append(f"  current: B = {self.current_b_ms} ms, L = {self.current_l_ms} ms; records at or beyond "
                         f"B + L behind: {self.current_at_risk}")
        for c in self.choices:
            extra = "" if c.extra_window_ms is None else f" ({self.windows} windows: {c.extra_window_ms} window-ms)"
            lines.append(f"  {c.target:.2%} on time: B = {c.b_ms} ms, L = {c.l_ms} ms; still late at most "
                         f"{c.still_late}; each window held {c.extra_hold_ms:+d} ms{extra}")
        return "\n".join(lines)


def advise_counts(histogram: Mapping[int, int], current_b_ms: Optional[int] = None, current_l_ms: Optional[int] = None,
                  targets: Sequence[float] = DEFAULT_TARGETS, windows: Optional[int] = None) -> Advice:
    """The advice from a histogram ``{bin: records}`` (see :func:`advise`)."""
    for t in targets:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
            raise ValueError(f"targets must be shares in (0, 1], got {t!r}")
    counts = {int(b): int(n) for b, n in histogram.items() if n}
    total = sum(counts.values())
    b_now = current_b_ms or 0
    l_now = current_l_ms or 0
    at_risk = None if current_b_ms is None else sum(n for b, n in counts.items() if bin_bounds(b)[0] >= b_now + l_now)
    choices = []
    for target in targets:
        need, seen, bound = target * total, 0, 0
        for b in sorted(counts):
            if seen >= need:
                break
            seen += counts[b]
            bound = bin_bounds(b)[1]
        # every delay below `bound` is on time with B + L = bound
        still = sum(n for b, n in counts.items() if bin_bounds(b)[0] >= bound)
        b_ms = min(b_now, bound)
        l_ms = max(0, bound - b_ms)
        hold = l_ms - l_now
        choices.append(Choice(target, b_ms, l_ms, still, hold, None if windows is None else windows * hold))
    return Advice(total, current_b_ms, current_l_ms, at_risk, windows, tuple(choices), counts)


def _read(path: str, storage_options: Optional[Mapping[str, str]] = None):
    from deltalake import DeltaTable

    from ..sinks import snapshot_dataset

    return snapshot_dataset(DeltaTable(str(path), storage_options=dict(storage_options or {}))).to_table()


def advise(delays: str | os.PathLike[str], targets: Sequence[float] = DEFAULT_TARGETS,
           results: str | os.PathLike[str] | None = None, pipeline: Optional[str] = None,
           storage_options: Optional[Mapping[str, str]] = None) -> Advice:
    """Read a delay table (:class:`eventtime.sinks.DeltaDelaySink`) and advise ``B`` and ``L``
    for each target share of records on time; ``results`` (the panes table) adds the number
    of windows, so that the extra state is given in window-ms.

    >>> advise("demo-output/delays").choices[0].l_ms  # doctest: +SKIP
    180000
    """
    import pyarrow.compute as pc

    table = _read(str(delays), storage_options)
    if pipeline is not None:
        table = table.filter(pc.equal(table.column("pipeline"), pipeline))
    grouped = table.group_by("delay_bin").aggregate([("records", "sum")])
    histogram = dict(zip(grouped.column("delay_bin").to_pylist(), grouped.column("records_sum").to_pylist()))
    b = pc.max(table.column("max_out_of_orderness_ms")).as_py() if table.num_rows else None
    lateness = pc.max(table.column("allowed_lateness_ms")).as_py() if table.num_rows else None
    windows = None
    if results is not None:
        panes = _read(str(results), storage_options)
        windows = len(set(zip(panes.column("key").to_pylist(), panes.column("window_start").to_pylist())))
    return advise_counts(histogram, b, lateness, targets, windows)


def plot_delays(advice: Advice, output: str) -> None:
    """A PNG of the delay distribution (log scale) with the current ``B`` and ``B + L`` marked."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    bins = sorted(b for b in advice.histogram if b > 0)  # bin 0 (at or ahead of the maximum) is in the title
    fig, ax = plt.subplots(figsize=(9, 4))
    if bins:
        lows = [max(1, bin_bounds(b)[0]) for b in bins]
        widths = [bin_bounds(b)[1] - max(1, bin_bounds(b)[0]) for b in bins]
        ax.bar(lows, [advice.histogram[b] for b in bins], width=widths, align="edge", color="#4c72b0")
        ax.set_xscale("log")
    if advice.current_b_ms:
        ax.axvline(advice.current_b_ms, color="#dd8452", linestyle="--", label=f"B = {advice.current_b_ms} ms")
    if advice.current_b_ms is not None and (advice.current_b_ms + (advice.current_l_ms or 0)) > 0:
        ax.axvline(advice.current_b_ms + (advice.current_l_ms or 0), color="#c44e52",
                   label=f"B + L = {advice.current_b_ms + (advice.current_l_ms or 0)} ms")
    ax.set_xlabel("delay behind the running maximum event time (ms, log scale)")
    ax.set_ylabel("records")
    ax.set_title(f"delays of {advice.records} records ({advice.histogram.get(0, 0)} at or ahead of the maximum, not drawn)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)
