"""The lateness advisor: the ``L`` that would have kept a share of the records on time, what it
costs in state, and the source partitions that drive it (how to read it: docs/advise.md).

It reads the delay histograms (``DeltaDelaySink``, by default at ``<late path>_delays``): each
valid record's delay ``d = M - t`` behind the running maximum ``M`` of the earlier batches;
and the late table: each late record with the watermark ``W = M - B`` it missed and the end
``e`` of its last window. With ``B'`` and ``L'`` a record is on time exactly when
``B' + L' > M - (e - 1)`` (:func:`needed_ms`), so surely when ``B' + L' > d``. Per target, the
advice is the smaller of the histogram's sufficient bound and the late records' exact one
(exact from today's ``B + L`` up), so it never decreases with the target. ``B`` stays today's
(it decides how complete the first pane is, which neither table tells); ``L`` is rounded up to
what ``human_ms`` prints. Bins (the JVM's ``Spec.delayBin``): 0 for a delay of 0 or less, the
delay below 8 ms, then 8 per power of two.

>>> bin_bounds(delay_bin(1000)), delay_bin(0), delay_bin(7)
((960, 1024), 0, 7)
"""

from __future__ import annotations

import math
import os
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import asdict, dataclass, replace
from itertools import accumulate
from typing import Mapping, Optional, Sequence

from ..core.kinds import LATE_RECORD


__all__ = ["DEFAULT_TARGETS", "DOMINANT_SHARE", "delay_bin", "bin_bounds", "needed_ms", "round_up_ms", "Choice",
           "PartitionShare", "Lagging", "Advice", "advise", "advise_counts"]

DEFAULT_TARGETS = (0.99, 0.999, 0.9999)
#: A partition with at least this share of the late records (without a late table: of the
#: records at least today's ``B + L`` behind) lags: the advice is also given without it.
DOMINANT_SHARE = 0.8
NO_PARTITION = "(none)"
_UNITS_MS = (86_400_000, 3_600_000, 60_000, 1000)  # what human_ms shows: d, h, min, s
Needs = Mapping[Optional[str], Sequence[Optional[int]]]


def delay_bin(delay_ms: int) -> int:
    """The bin of a delay (the same function as the JVM's ``Spec.delayBin``).

    >>> delay_bin(-5), delay_bin(5), delay_bin(8), delay_bin(60_000)
    (0, 5, 8, 110)
    """
    if delay_ms < 8:
        return max(int(delay_ms), 0)
    e = delay_ms.bit_length() - 1
    return 8 * (e - 2) + ((delay_ms >> (e - 3)) & 7)


def bin_bounds(bin_: int) -> tuple[int, int]:
    """``[low, high)`` of a bin in ms (bin 0 holds every delay of 0 or less: ``[0, 1)``).

    >>> bin_bounds(0), bin_bounds(110)
    ((0, 1), (57344, 61440))
    """
    if bin_ < 8:
        return bin_, bin_ + 1
    e, sub = bin_ // 8 + 2, bin_ % 8
    return (8 + sub) << (e - 3), (9 + sub) << (e - 3)


def needed_ms(watermark_ms: int, window_end_ms: int, b_ms: int) -> int:
    """The smallest ``B' + L'`` that keeps a late record on time under the global watermark: it
    missed ``W = M - B`` with its last window ending at ``e``; ``B' + L' > M - (e - 1)`` keeps
    that window open at ``W' = M - B'``. A window ``[480 s, 540 s)`` missed at 600 s, ``B`` 10 s:

    >>> needed_ms(watermark_ms=600_000, window_end_ms=540_000, b_ms=10_000)
    70002
    """
    return watermark_ms + b_ms - window_end_ms + 2


def round_up_ms(ms: int) -> int:
    """``ms`` rounded up to what ``human_ms`` prints (two units; exact below a second).

    >>> from eventtime.core._duration import human_ms
    >>> round_up_ms(11_474_336), human_ms(round_up_ms(11_474_336)), round_up_ms(1024), round_up_ms(250)
    (11520000, '3 h 12 min', 2000, 250)
    """
    if ms <= 1000:
        return max(int(ms), 0)
    step = [u for u in _UNITS_MS if u <= ms][:2][-1]
    return -(-int(ms) // step) * step


@dataclass(frozen=True)
class Choice:
    """One ``B`` and ``L`` and the targets it reaches (``target``: the largest). ``on_time_share``:
    at least (exact when ``share_exact``); ``still_late``: late with it, at most; ``late_kept`` /
    ``late_still``: of today's late records, kept on time / still late (exact when
    ``Advice.late_exact``; ``None`` without a late table); ``extra_hold_ms``: ``(B' + L') - (B +
    L)``, each window held that much longer (negative: less); ``extra_window_ms``: times the windows."""

    targets: tuple[float, ...]
    b_ms: int
    l_ms: int
    on_time_share: float
    share_exact: bool
    still_late: int
    late_kept: Optional[int]
    late_still: Optional[int]
    extra_hold_ms: int
    extra_window_ms: Optional[int]
    target: float


@dataclass(frozen=True)
class PartitionShare:
    """A partition's ``records`` of the late ones (``Advice.drivers_of``), ``share``, largest delay."""

    partition: str
    records: int
    share: float
    max_delay_ms: Optional[int]


@dataclass(frozen=True)
class Lagging:
    """A partition with :data:`DOMINANT_SHARE` or more of the late records; ``others``: the advice without it."""

    partition: str
    share: float
    other_partitions: int
    other_records: int
    other_late: Optional[int]
    others: tuple[Choice, ...]


@dataclass(frozen=True)
class Advice:
    """The advice: :meth:`to_json` is the data, :func:`eventtime.query.advise_text.describe` the text. ``records``: the
    histograms' (the shares are of these); ``late_records``: today's (``None`` without a late
    table), ``late_uncovered`` of them in batches the histograms lack (left out of the shares)."""

    records: int
    current_b_ms: Optional[int]
    current_l_ms: Optional[int]
    late_records: Optional[int]
    late_exact: bool
    windows: Optional[int]
    choices: tuple[Choice, ...]
    histogram: Mapping[int, int]
    drivers: tuple[PartitionShare, ...] = ()
    drivers_of: Optional[str] = None
    lagging: Optional[Lagging] = None
    partitions: int = 0
    late_uncovered: int = 0
    delays_table: Optional[str] = None
    late_table: Optional[str] = None

    def to_json(self) -> dict:
        """JSON-ready data, every duration in integer ``*_ms``; the histogram with its bounds.

        >>> advise_counts({0: 10}, 0, 0, targets=(1,)).to_json()["choices"][0]["l_ms"]
        1
        """
        out = asdict(self)
        out["histogram"] = [{"bin": b, "low_ms": bin_bounds(b)[0], "high_ms": bin_bounds(b)[1], "records": n}
                            for b, n in sorted(self.histogram.items())]
        return out


def _choices(counts: Mapping[int, int], late_all: Optional[list], late_covered: Optional[list], exact: bool,
             b_now: int, l_now: int, targets: Sequence[float], windows: Optional[int]) -> tuple[Choice, ...]:
    """One choice per distinct ``L`` over the sorted targets; ``late_*``: the sorted needs of
    today's late records (all; those of the batches the histogram covers), ``inf`` if unknown."""
    total = sum(counts.values())
    if total == 0:
        return ()
    bins = sorted(counts)
    highs = [bin_bounds(b)[1] for b in bins]
    cum = list(accumulate(counts[b] for b in bins))
    today = b_now + l_now
    groups: dict[int, list[float]] = {}
    for q in targets:
        need = math.ceil(round(q * total, 9))  # records to keep on time
        bound = highs[bisect_left(cum, need)]  # every record of the bins below is on time
        if late_covered is not None:
            k = len(late_covered) - (total - need)  # of today's late records, those to keep
            bound = int(min(bound, today if k <= 0 else max(today, late_covered[k - 1])))
        l_ms = round_up_ms(bound - b_now) if bound > b_now else 0
        groups.setdefault(l_now if bound <= today <= b_now + l_ms else l_ms, []).append(q)  # today's, if enough
    out = []
    for l_ms, qs in groups.items():
        s = b_now + l_ms
        i = bisect_right(highs, s)
        still, share_exact = total - (cum[i - 1] if i else 0), False
        if late_covered is not None and s >= today:  # on time today stays on time: the late records decide
            covered_still = len(late_covered) - bisect_right(late_covered, s)
            if covered_still <= still:
                still, share_exact = covered_still, exact
        kept = None if late_all is None else bisect_right(late_all, s)
        out.append(Choice(tuple(qs), b_now, l_ms, (total - still) / total, share_exact or still == 0, still, kept,
                          None if kept is None else len(late_all) - kept, s - today,
                          None if windows is None else windows * (s - today), max(qs)))
    return tuple(out)


def advise_counts(histogram: Optional[Mapping[int, int]], current_b_ms: Optional[int] = None,
                  current_l_ms: Optional[int] = None, targets: Sequence[float] = DEFAULT_TARGETS,
                  windows: Optional[int] = None, *, by_partition: Optional[Mapping[Optional[str], Mapping[int, int]]] = None,
                  late: Optional[Needs] = None, late_exact: bool = True, late_uncovered: Optional[Needs] = None) -> Advice:
    """The advice from a histogram ``{bin: records}`` or ``by_partition`` (``{partition: {bin:
    records}}``), today's ``B`` and ``L``, and optionally today's late records: ``late``, per
    partition, each one's :func:`needed_ms` (``None``: unknown; ``late_exact=False`` when some
    are upper bounds), ``late_uncovered`` those of batches the histograms do not cover.

    >>> a = advise_counts(None, 10_000, 60_000, targets=(0.99, 0.999),
    ...                   by_partition={"0": {0: 950}, "1": {0: 40, delay_bin(3_600_000): 10}},
    ...                   late={"1": [3_600_000] * 10})
    >>> [(c.targets, c.b_ms, c.l_ms, c.late_kept) for c in a.choices]
    [((0.99,), 10000, 0, 0), ((0.999,), 10000, 3590000, 10)]
    >>> a.lagging.partition, [(c.targets, c.l_ms) for c in a.lagging.others]
    ('1', [((0.99, 0.999), 0)])
    """
    for t in targets:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
            raise ValueError(f"targets must be shares in (0, 1], got {t!r}")
    if not targets:
        raise ValueError("targets must not be empty")
    label = (lambda p: NO_PARTITION if p is None else str(p))  # noqa: E731
    parts: dict[str, Counter] = {}
    for p, hist in (by_partition if by_partition is not None else {None: histogram or {}}).items():
        parts.setdefault(label(p), Counter()).update({int(b): int(n) for b, n in hist.items() if n})
    parts = {p: h for p, h in parts.items() if h}
    b_now, l_now = current_b_ms or 0, current_l_ms or 0
    has_late = late is not None or late_uncovered is not None
    records = [(label(p), math.inf if v is None else int(v), inside)  # (partition, need, in the histograms)
               for source, inside in ((late, True), (late_uncovered, False)) for p, vs in (source or {}).items() for v in vs]

    def advice_for(keep: set[str]) -> tuple[Counter, tuple[Choice, ...]]:
        counts = sum((parts.get(p, Counter()) for p in keep), Counter())
        mine = [(need, inside) for p, need, inside in records if p in keep]
        every, covered = (sorted(n for n, _ in mine), sorted(n for n, i in mine if i)) if has_late else (None, None)
        return counts, _choices(counts, every, covered, late_exact, b_now, l_now, sorted(set(targets)), windows)

    names = set(parts) | {p for p, _, _ in records}
    histogram, choices = advice_for(names)
    held = (Counter(p for p, _, _ in records) if has_late else
            {p: sum(n for b, n in h.items() if bin_bounds(b)[0] >= b_now + l_now) for p, h in parts.items()})
    drivers: tuple[PartitionShare, ...] = ()
    lagging = None
    if sum(held.values()) and len(names) > 1:
        ranked = sorted(((n, p) for p, n in held.items() if n), key=lambda np: (-np[0], np[1]))
        drivers = tuple(PartitionShare(p, n, n / sum(held.values()), bin_bounds(max(parts[p]))[1] if p in parts else None)
                        for n, p in ranked[:3])
        others = names - {drivers[0].partition}
        if drivers[0].share >= DOMINANT_SHARE and any(p in parts for p in others):
            other_counts, other_choices = advice_for(others)
            lagging = Lagging(drivers[0].partition, drivers[0].share, sum(1 for p in others if p in parts),
                              sum(other_counts.values()), sum(held.get(p, 0) for p in others) if has_late else None,
                              other_choices)
    drivers_of = "late records" if has_late else "records at least B + L behind (they can be late)"
    return Advice(sum(histogram.values()), current_b_ms, current_l_ms, len(records) if has_late else None, late_exact,
                  windows, choices, dict(histogram), drivers, drivers_of if drivers else None, lagging, len(parts),
                  sum(1 for _, _, inside in records if not inside))


def _read(path, storage_options: Optional[Mapping[str, str]], pipeline: Optional[str], columns: Sequence[str],
          late: bool = False):
    """A Delta table's ``columns`` (those it has; timestamps as integer ms), the ``pipeline``'s
    rows; ``late``: a late table's late records."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    from eventtime.query.late import open_late_table
    from eventtime.sinks import snapshot_dataset

    opts = dict(storage_options or {})
    dataset = snapshot_dataset(open_late_table(path, opts) if late else DeltaTable(os.fspath(path), storage_options=opts))
    keep = ds.field("kind") == LATE_RECORD if late else None
    if pipeline is not None and "pipeline" in dataset.schema.names:
        keep = ds.field("pipeline") == pipeline if keep is None else keep & (ds.field("pipeline") == pipeline)
    table = dataset.to_table(columns=[c for c in columns if c in dataset.schema.names], filter=keep)
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(pa.timestamp("ms", tz="UTC"), safe=False)
                                     .cast(pa.int64()))
    return table


def advise(delays: str | os.PathLike[str], targets: Sequence[float] = DEFAULT_TARGETS,
           results: str | os.PathLike[str] | None = None, pipeline: Optional[str] = None,
           storage_options: Optional[Mapping[str, str]] = None, late: str | os.PathLike[str] | None = None) -> Advice:
    """Read a delay table (``DeltaDelaySink``) and advise ``L`` for each target share of records
    on time. ``late``, the late table, adds today's late records (kind ``late``): how many, how
    many each choice keeps, their partitions; ``results`` (the panes) the windows, for the state
    cost in all; ``pipeline`` keeps that pipeline's rows. The late records' counts are exact for
    tumbling, sliding and calendar windows under the global watermark; for sessions (a results
    table with ``merged_from``) and records without a window end they are bounds (``late_exact``
    False); for a job run with ``watermark="per_partition"``, what the global one would at best keep.

    >>> advice = advise("out/late_delays", late="out/late")  # doctest: +SKIP
    >>> advice.late_records, advice.choices[-1].l_ms  # doctest: +SKIP
    (572, 11400000)
    """
    table = _read(delays, storage_options, pipeline, ["partition", "delay_bin", "records", "query_id", "batch_id",
                                                      "written_at", "max_out_of_orderness_ms", "allowed_lateness_ms"])
    missing = [c for c in ("partition", "delay_bin", "records") if c not in table.column_names]
    if missing:
        raise ValueError(f"{os.fspath(delays)!r} is not a delay table: it has no column(s) {', '.join(missing)}; "
                         "give the table DeltaDelaySink writes (by default <late path>_delays)")
    by_partition: dict[Optional[str], dict[int, int]] = {}
    for r in table.group_by(["partition", "delay_bin"]).aggregate([("records", "sum")]).to_pylist():
        by_partition.setdefault(r["partition"], {})[r["delay_bin"]] = r["records_sum"]
    keys = [c for c in ("query_id", "batch_id") if c in table.column_names]
    config = [(c, "max") for c in ("written_at", "max_out_of_orderness_ms", "allowed_lateness_ms") if c in table.column_names]
    batches = {(r.get("query_id"), r.get("batch_id")): (r.get("written_at_max") or 0, r.get("batch_id") or 0,
                                                        r.get("max_out_of_orderness_ms_max"), r.get("allowed_lateness_ms_max"))
               for r in (table.group_by(keys).aggregate(config).to_pylist() if keys and config else [])}
    known = [v for v in batches.values() if v[2] is not None]  # today's B and L: the latest batch's
    b, lateness = max(known, key=lambda v: v[:2])[2:] if known else (None, None)
    windows, exact = None, True
    if results is not None:
        panes = _read(results, storage_options, pipeline, ["key", "window_start", "merged_from"])
        exact = "merged_from" not in panes.column_names
        windows = len(set(zip(*(panes.column(c).to_pylist() for c in ("key", "window_start")))))
    needs: Optional[dict] = None
    uncovered: Optional[dict] = None
    if late is not None:
        needs, uncovered = {}, {}
        for r in _read(late, storage_options, pipeline, ["partition", "watermark", "window_end", "lateness_ms", "query_id",
                                                         "batch_id"], late=True).to_pylist():
            batch = batches.get((r.get("query_id"), r.get("batch_id")))
            b_then = (b or 0) if batch is None or batch[2] is None else batch[2]  # M = W + the B of its batch
            w, e, lat = r.get("watermark"), r.get("window_end"), r.get("lateness_ms")
            if w is not None and e is not None:
                need = needed_ms(w, e, b_then)
            else:  # its delay M - t = lateness + B: kept when B' + L' > it (an upper bound)
                need, exact = (None if lat is None else lat + b_then + 1), False
            (needs if batch is not None or not keys or r.get("query_id") is None else uncovered).setdefault(
                r.get("partition"), []).append(need)
    advice = advise_counts(None, b, lateness, targets, windows, by_partition=by_partition, late=needs,
                           late_exact=exact, late_uncovered=uncovered)
    return replace(advice, delays_table=os.fspath(delays), late_table=None if late is None else os.fspath(late))
