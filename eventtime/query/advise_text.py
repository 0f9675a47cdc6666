"""The lateness advice for people: its text (durations, shares, counts) and its figure."""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ..core._duration import human_ms
from .advise import DOMINANT_SHARE, Advice, Choice, bin_bounds

__all__ = ["describe", "plot_delays"]


def describe(advice: Advice) -> str:
    """The advice in durations and counts, one line per distinct choice (docs/advise.md).

    >>> from eventtime.query.advise import advise_counts, delay_bin
    >>> a = advise_counts({0: 990, delay_bin(100_000): 9, delay_bin(1_000_000): 1}, 10_000, 60_000)
    >>> print(describe(a))
    lateness advice for the global watermark (W = max event time - B)
      delays: 1,000 valid records behind the running maximum event time
      today: B = 10 s, L = 1 min
      99 %     B = 10 s, L = 0 ms: at least 99 % on time (at most 10 of 1,000 records late); each window held 1 min less than today
      99.9 %   B = 10 s, L = 1 min 37 s: at least 99.9 % on time (at most 1 of 1,000 records late); each window held 37 s longer than today
      99.99 %  B = 10 s, L = 17 min 19 s: 100 % on time; each window held 16 min 19 s longer than today
    """
    parts = f" in {advice.partitions} partitions" if advice.partitions > 1 else ""
    where = (lambda path: f" ({path})" if path else "")  # noqa: E731
    lines = ["lateness advice for the global watermark (W = max event time - B)",
             f"  delays: {_n(advice.records, 'valid record')}{parts} behind the running maximum event time"
             + where(advice.delays_table)]
    today = ("  today: B and L unknown (the delay table does not record them)" if advice.current_b_ms is None
             else f"  today: B = {human_ms(advice.current_b_ms)}, L = {human_ms(advice.current_l_ms or 0)}")
    if advice.late_records is not None:
        today += f"; {_n(advice.late_records, 'record')} {'was' if advice.late_records == 1 else 'were'} late"
    lines.append(today + ("" if advice.late_records is None else where(advice.late_table)))
    if advice.late_uncovered:
        lines.append(f"  ({advice.late_uncovered:,} of them in batches before the delay histograms began: "
                     "left out of the shares)")
    if advice.records == 0:
        return "\n".join(lines + ["  no delays recorded yet: a query's first batch has no maximum to be behind, "
                                  "the histograms fill from its second batch on"])
    if advice.drivers:
        lines.append(f"  {advice.drivers_of} by partition: " + "; ".join(
            f"{p.partition}: {p.records:,} ({_pct_floor(p.share)}" + ("" if p.max_delay_ms is None else
            f", {'delays ' if i == 0 else ''}up to {human_ms(p.max_delay_ms)}") + ")" for i, p in enumerate(advice.drivers)))
    lines += _choice_lines(advice, advice.choices, advice.records, advice.late_records, "  ")
    lag = advice.lagging
    if lag is not None:
        lines += [f"  partition {lag.partition} lags: it holds {_pct_floor(lag.share)} of the {advice.drivers_of} "
                  f"({_pct(DOMINANT_SHARE)} or more names one partition)",
                  f"    without it, the {_n(lag.other_partitions, 'other partition')} "
                  f"need{'' if lag.other_partitions > 1 else 's'}:",
                  *_choice_lines(advice, lag.others, lag.other_records, lag.other_late, "      "),
                  '    or judge each partition by its own progress: window_aggregate(..., partition_col=..., '
                  'watermark="per_partition") (docs/semantics.md, "Per-partition watermarks"); '
                  "every window then waits for the slowest active partition"]
    return "\n".join(lines)

def _choice_lines(advice, choices: Sequence[Choice], records: int, late: Optional[int], indent: str) -> list[str]:
    heads = [", ".join(_pct(t) for t in c.targets) for c in choices]
    width = max((len(h) for h in heads), default=0)
    return [f"{indent}{head:<{width}}  {_choice_text(advice, c, records, late or 0)}" for head, c in zip(heads, choices)]

def _choice_text(advice, c: Choice, records: int, late: int) -> str:
    b_now, l_now = advice.current_b_ms, advice.current_l_ms
    text = f"B = {human_ms(c.b_ms)}, L = {human_ms(c.l_ms)}" + (" (as today)" if (c.b_ms, c.l_ms) == (b_now, l_now) else "")
    share = _pct_floor(c.on_time_share)
    text += (f": {share} on time" if c.share_exact else
             f": at least {share} on time (at most {c.still_late:,} of {_n(records, 'record')} late)")
    if c.late_kept is not None and late:
        kept, still, records_late = c.late_kept, late - c.late_kept, _n(late, "late record")
        if kept == late:
            text += "; keeps " + {1: "the late record", 2: "both late records"}.get(late, f"all {records_late}") + " on time"
        elif kept == 0 and (advice.late_exact or c.extra_hold_ms < 0):
            text += f"; the {records_late} {'stays' if late == 1 else 'stay'} late"
        elif advice.late_exact:
            text += f"; keeps {kept:,} of the {records_late} on time, {still:,} still late"
        else:
            text += f"; keeps at least {kept:,} of the {records_late} on time (at most {still:,} still late)"
    hold = c.extra_hold_ms
    if hold == 0:
        return text + "; windows held as long as today"
    text += f"; each window held {human_ms(abs(hold))} {'longer' if hold > 0 else 'less'} than today"
    if c.extra_window_ms is not None and advice.windows:
        text += (f" ({advice.windows:,} windows: {human_ms(abs(c.extra_window_ms))} of window-time "
                 f"{'more' if hold > 0 else 'less'} in all)")
    return text


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _pct(share: float) -> str:
    return f"{share * 100:.6f}".rstrip("0").rstrip(".") + " %"


def _pct_floor(share: float) -> str:
    """A reached share, never shown above what it is (floored to 0.01 %)."""
    return "100 %" if share >= 1 else _pct(math.floor(round(share * 10_000, 6)) / 10_000)


def plot_delays(advice: Advice, output: str) -> None:
    """A PNG of the delay distribution (log scale), today's ``B`` and ``B + L`` and the advice.

    >>> plot_delays(advise("out/late_delays"), "delays.png")  # doctest: +SKIP
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    bins = sorted(b for b in advice.histogram if b > 0)  # bin 0 (at or ahead of the maximum) is in the title
    fig, ax = plt.subplots(figsize=(9, 4))
    if bins:
        lows = [max(1, bin_bounds(b)[0]) for b in bins]
        ax.bar(lows, [advice.histogram[b] for b in bins], width=[bin_bounds(b)[1] - low for b, low in zip(bins, lows)],
               align="edge", color="#4c72b0")
        ax.set_xscale("log")
    b_now, l_now = advice.current_b_ms or 0, advice.current_l_ms or 0
    marks = [(b_now, "#dd8452", "--", f"B = {human_ms(b_now)}"),
             (b_now + l_now, "#c44e52", "-", f"today's B + L = {human_ms(b_now + l_now)}")]
    marks += [(c.b_ms + c.l_ms, "#55a868", ":", f"{', '.join(_pct(t) for t in c.targets)}: B + L = "
               f"{human_ms(c.b_ms + c.l_ms)}") for c in advice.choices]
    for i, (x, color, style, label) in enumerate(marks):
        if x > 0 and x not in [m[0] for m in marks[:i]]:  # one mark per position
            ax.axvline(x, color=color, linestyle=style, label=label)
    ax.set(xlabel="delay behind the running maximum event time (ms, log scale)", ylabel="records",
           title=f"delays of {advice.records:,} records ({advice.histogram.get(0, 0):,} at or ahead of the maximum, "
                 "not drawn)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)
