"""The stateful processor behind :func:`eventtime.window_aggregate`.

Design (measured; the findings are listed in eventtime/spark/__init__.py):

* Grouping key = a hash bucket of the user key (``pmod(xxhash64(keys), num_buckets)``), not
  the user key: every state call is a socket round trip (~70-150 us), so the processor works
  on all rows of a bucket at once with pandas and keeps **one state value per (bucket,
  slice)** (a pickled, columnar accumulator frame holding every user key of the bucket).
  Slices are ``gcd(size, slide)`` wide: a tumbling window is one slice, a sliding window is
  the union of ``size / slice`` slices and is combined only when a pane is emitted.
* Event time reaches the operator as a plain ``long`` (``__et_ms``) that carries no watermark
  metadata, so Spark does not drop rows behind the watermark before the processor: the
  processor decides lateness itself and sends those rows to the ``late`` output.
* ``timeMode="EventTime"``: ``timerValues.getCurrentWatermarkInMs()`` is the watermark ``W``
  of docs/semantics.md during a data batch (computed from the previous batches); the watermark
  ``W'`` computed from a batch is seen by the no-data batch Spark runs right after it, where
  the event-time timers fire. Each bucket keeps at most a few timers: one at the earliest
  pending event (an ON_TIME firing ``m`` or an expiry ``m + L``); the timer handler sweeps
  every window of the bucket that became due or expired and re-arms the next timer.
* A data batch first runs the same sweep for ``W`` ("catch-up"), so the result does not depend
  on Spark running the no-data batch (e.g. ``spark.sql.streaming.noDataMicroBatches.enabled``
  off): panes would then only come one batch later.

The window logic (:class:`WindowLogic`) is written against a tiny state interface so that the
same code runs in Spark, in :class:`pyspark.sql.streaming.tws_tester.TwsTester` and in plain
unit tests.
"""

from __future__ import annotations

import builtins
import decimal
import json
import math
import pickle
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional, Sequence

import numpy as np
import pandas as pd

from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from .._json import row_json, to_python
from ..aggregations import Aggregation, mean_of
from ..timestamps import TOO_LATE
from ..trigger import DISCARDING, END_OF_INPUT_MS, FINAL, FINAL_ONLY, LATE, ON_TIME

__all__ = ["EngineSpec", "WindowLogic", "EventTimeProcessor", "CLS_DATA", "CLS_HEARTBEAT", "CLS_INVALID", "OUTPUT_FIXED", "end_of_input_rows"]

# Row classes of the operator input (column ``__et_cls``).
CLS_DATA = 0
CLS_HEARTBEAT = 1
CLS_INVALID = 2

# Internal column names of the operator input. Column names that start with "_" do not
# survive the trip to the Python worker (they arrive as "_<position>", measured on 4.3),
# so the user's columns are passed as "et__u<i>" and the internals as "et__<name>".
C_BUCKET = "et__bucket"
C_MS = "et__ms"
C_CLS = "et__cls"
C_REASON = "et__reason"
C_RAW = "et__raw"
C_PART = "et__part"
C_OFF = "et__off"
C_SLICE = "et__slice"
C_WS = "et__ws"

# Output columns besides the key and aggregation columns, in order, with Spark DDL types.
OUTPUT_FIXED = [
    ("kind", "string"),
    ("window_start", "bigint"),
    ("window_end", "bigint"),
    ("pane_timing", "string"),
    ("pane_index", "bigint"),
    ("is_final", "boolean"),
    ("reason", "string"),
    ("event_time", "bigint"),
    ("raw_timestamp", "string"),
    ("watermark", "bigint"),
    ("lateness_ms", "bigint"),
    ("partition", "string"),
    ("offset", "bigint"),
    ("payload", "string"),
    ("stat_max_event_time", "bigint"),
    ("stat_rows", "bigint"),
]


@dataclass(frozen=True)
class EngineSpec:
    """Everything the processor needs; picklable (cloudpickle ships it to the workers)."""

    keys: tuple[str, ...]  # operator-input names of the key columns
    size_ms: int
    slide_ms: int
    offset_ms: int
    allowed_lateness_ms: int
    aggregations: tuple[Aggregation, ...]
    accumulation: str
    emit: str
    # (operator-input name, user name) of every original column, for the JSON payload of
    # late / invalid records.
    payload_columns: tuple[tuple[str, str], ...] = ()
    # Output names of the key columns (default: the same as ``keys``).
    key_names: tuple[str, ...] = ()
    # Operator-input name of the raw event-time column: the raw text of late records is
    # rendered from it (only invalid records ship their raw text from Spark).
    ts_column: Optional[str] = None
    # Heartbeat flag column (None: no heartbeats); the raw event-time column when it already
    # is the event time in ms (integral, unit ms) so that no parsed copy is shipped.
    heartbeat_column: Optional[str] = None
    ms_column: Optional[str] = None
    # Aggregations whose input column is integral in Spark: their sum is returned as int.
    integral_columns: frozenset = frozenset()

    @property
    def slice_ms(self) -> int:
        return math.gcd(self.size_ms, self.slide_ms)

    # --- window arithmetic (same formulas as eventtime.window; vectorised on int64 arrays) ---
    def last_start(self, ts, step: int):
        return ts - (ts - self.offset_ms) % step

    def windows_of_slice(self, slice_start: int) -> list[int]:
        """Starts of the windows containing the whole slice, ascending."""
        last = int(self.last_start(slice_start, self.slide_ms))
        starts = []
        start = last
        while start + self.size_ms > slice_start:
            starts.append(start)
            start -= self.slide_ms
        starts.reverse()
        return starts

    def slices_of_window(self, window_start: int) -> range:
        return range(window_start, window_start + self.size_ms, self.slice_ms)

    def max_ts(self, window_start: int) -> int:
        return window_start + self.size_ms - 1


# ----------------------------------------------------------------------------------------
# Columnar accumulators. A frame has the key columns ``k0..kn`` (plus grouping columns) and,
# per aggregation i, some of: c{i} count, s{i} sum, n{i} non-null count, v{i} value,
# t{i} event time of v, u{i} Python accumulator (udaf). They merge like Aggregation.merge.
# ----------------------------------------------------------------------------------------


def _acc_columns(aggs: Sequence[Aggregation]) -> tuple[list[str], list[int], list[int], list[int], list[int], list[int]]:
    additive: list[str] = []
    mins, maxs, firsts, lasts, udafs = [], [], [], [], []
    for i, agg in enumerate(aggs):
        if agg.kind == "count":
            additive.append(f"c{i}")
        elif agg.kind in ("sum", "mean"):
            additive += [f"s{i}", f"n{i}"]
        elif agg.kind == "min":
            mins.append(i)
        elif agg.kind == "max":
            maxs.append(i)
        elif agg.kind == "first":
            firsts.append(i)
        elif agg.kind == "last":
            lasts.append(i)
        else:
            udafs.append(i)
    return additive, mins, maxs, firsts, lasts, udafs


def _group_index(frame: pd.DataFrame, group_cols: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Unique groups of ``frame`` (first-appearance order; nulls form a group) and each row's group number.

    Vectorised: one ``pd.factorize`` per column, codes combined and re-factorized.
    """
    if len(group_cols) == 1:
        codes, uniques = pd.factorize(frame[group_cols[0]], use_na_sentinel=False)
        return pd.DataFrame({group_cols[0]: uniques}), np.asarray(codes)
    combined = None
    for col in group_cols:
        codes, uniques = pd.factorize(frame[col], use_na_sentinel=False)
        codes = np.asarray(codes, dtype=np.int64)
        if combined is None:
            combined = codes
        else:
            combined, _ = pd.factorize(combined * np.int64(len(uniques)) + codes)
            combined = np.asarray(combined, dtype=np.int64)
    codes, _ = pd.factorize(combined)
    codes = np.asarray(codes)
    _, first = np.unique(codes, return_index=True)
    groups = frame[group_cols].iloc[first].reset_index(drop=True)
    return groups, codes


def _is_null_array(values: pd.Series) -> np.ndarray:
    return values.isna().to_numpy()


class Accumulators:
    """Vectorised create/add/merge/result of a list of :class:`Aggregation`."""

    def __init__(self, aggs: Sequence[Aggregation], integral_columns: frozenset = frozenset()) -> None:
        self.aggs = tuple(aggs)
        self.integral = integral_columns
        self.additive, self.mins, self.maxs, self.firsts, self.lasts, self.udafs = _acc_columns(self.aggs)

    # rows -> accumulators -------------------------------------------------------------
    def from_rows(self, rows: pd.DataFrame, group_cols: list[str], ts_col: str) -> pd.DataFrame:
        """Accumulators of ``rows`` grouped by ``group_cols`` (one output row per group)."""
        groups, codes = _group_index(rows, group_cols)
        ngroups = len(groups)
        out = {c: groups[c].to_numpy() for c in group_cols}
        for i, agg in enumerate(self.aggs):
            if agg.kind == "count":
                out[f"c{i}"] = np.bincount(codes, minlength=ngroups).astype(np.int64)
                continue
            values = rows[agg.column]
            if agg.kind == "udaf":
                accs = [agg.create() for _ in range(ngroups)]
                for code, value in zip(codes.tolist(), _py_values(values)):
                    accs[code] = agg.add(accs[code], value, 0)
                out[f"u{i}"] = _obj(accs)
                continue
            null = _is_null_array(values)
            ok = ~null
            out[f"n{i}"] = np.bincount(codes[ok], minlength=ngroups).astype(np.int64)
            if agg.kind in ("sum", "mean"):
                out[f"s{i}"] = _sum_by_group(values.to_numpy()[ok], codes[ok], ngroups)
            elif agg.kind in ("min", "max"):
                sub = pd.DataFrame({"g": codes[ok], "v": values[ok].to_numpy()})
                red = sub.groupby("g", sort=False)["v"].min() if agg.kind == "min" else sub.groupby("g", sort=False)["v"].max()
                v = np.empty(ngroups, dtype=object)
                v[red.index.to_numpy()] = _py_list(red)
                out[f"v{i}"] = v
            else:  # first / last
                ts = rows[ts_col].to_numpy()[ok]
                sub = pd.DataFrame({"g": codes[ok], "t": ts, "v": values[ok].to_numpy()})
                t_out, v_out = _first_last(sub, ngroups, agg.kind == "first")
                out[f"t{i}"] = t_out
                out[f"v{i}"] = v_out
        return pd.DataFrame(out)

    # merge ------------------------------------------------------------------------------
    def merge(self, frames: list[pd.DataFrame], group_cols: list[str]) -> pd.DataFrame:
        """Merge accumulator frames row-wise by ``group_cols``."""
        frames = [f for f in frames if f is not None and len(f)]
        if not frames:
            return self.empty(group_cols)
        allf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        groups, codes = _group_index(allf, group_cols)
        ngroups = len(groups)
        if ngroups == len(allf):
            return allf.reset_index(drop=True)
        out = {c: groups[c].to_numpy() for c in group_cols}
        for col in self.additive:
            out[col] = _sum_by_group(allf[col].to_numpy(), codes, ngroups)
        for i in self.mins + self.maxs:
            n = allf[f"n{i}"].to_numpy()
            out[f"n{i}"] = np.bincount(codes, weights=n, minlength=ngroups).astype(np.int64)
            ok = n > 0
            sub = pd.DataFrame({"g": codes[ok], "v": allf[f"v{i}"].to_numpy()[ok]})
            gb = sub.groupby("g", sort=False)["v"]
            red = gb.min() if i in self.mins else gb.max()
            v = np.empty(ngroups, dtype=object)
            v[red.index.to_numpy()] = _py_list(red)
            out[f"v{i}"] = v
        for i in self.firsts + self.lasts:
            n = allf[f"n{i}"].to_numpy()
            out[f"n{i}"] = np.bincount(codes, weights=n, minlength=ngroups).astype(np.int64)
            ok = n > 0
            sub = pd.DataFrame({"g": codes[ok], "t": allf[f"t{i}"].to_numpy()[ok], "v": allf[f"v{i}"].to_numpy()[ok]})
            out[f"t{i}"], out[f"v{i}"] = _first_last(sub, ngroups, i in self.firsts)
        for i in self.udafs:
            agg = self.aggs[i]
            accs: list = [_MISSING] * ngroups
            for code, acc in zip(codes.tolist(), allf[f"u{i}"].tolist()):
                accs[code] = acc if accs[code] is _MISSING else agg.merge(accs[code], acc)
            out[f"u{i}"] = _obj(accs)
        return pd.DataFrame(out)

    def empty(self, group_cols: list[str]) -> pd.DataFrame:
        cols = list(group_cols) + self.additive
        for i in self.mins + self.maxs:
            cols += [f"n{i}", f"v{i}"]
        for i in self.firsts + self.lasts:
            cols += [f"n{i}", f"t{i}", f"v{i}"]
        cols += [f"u{i}" for i in self.udafs]
        return pd.DataFrame({c: [] for c in cols})

    # result -----------------------------------------------------------------------------
    def results(self, accs: pd.DataFrame) -> dict[str, Any]:
        """Output values per aggregation name: typed arrays, or object arrays with None for null."""
        res: dict[str, Any] = {}
        for i, agg in enumerate(self.aggs):
            if agg.kind == "count":
                res[agg.name] = accs[f"c{i}"].to_numpy().astype(np.int64)
            elif agg.kind == "udaf":
                res[agg.name] = _obj([agg.result(a) for a in accs[f"u{i}"].tolist()])
            else:
                n = accs[f"n{i}"].to_numpy()
                empty = n <= 0
                if agg.kind == "mean":
                    res[agg.name] = _obj([None if c <= 0 else mean_of(t, c) for t, c in zip(_py_list(accs[f"s{i}"]), n.tolist())])
                elif agg.kind == "sum":
                    vals = accs[f"s{i}"].to_numpy()
                    if agg.column in self.integral:
                        vals = _checked_int64(vals, agg.name)
                    if empty.any():
                        vals = vals.astype(object)
                        vals[empty] = None
                    res[agg.name] = vals
                else:
                    vals = accs[f"v{i}"].to_numpy(dtype=object).copy()
                    vals[empty] = None
                    res[agg.name] = vals
        return res


_MISSING = object()
_INT64_MAX = 2**63 - 1


def _sum_by_group(vals: np.ndarray, codes: np.ndarray, ngroups: int) -> np.ndarray:
    """Per-group sums of non-null ``vals``, in record order, without a float round trip.

    Integers stay int64 while no sum can overflow, else Python ints (object); decimals are
    added as ``Decimal`` with enough precision for any Spark decimal; floats as float64.
    """
    if vals.dtype.kind in "iub":
        ints = vals.astype(np.int64, copy=False)
        bound = builtins.max(abs(int(ints.max())), abs(int(ints.min()))) * len(ints) if len(ints) else 0
        if bound <= _INT64_MAX:
            sums = np.zeros(ngroups, dtype=np.int64)
            np.add.at(sums, codes, ints)
            return sums
        vals = ints.astype(object)
    if vals.dtype.kind == "f":
        sums = np.zeros(ngroups, dtype=np.float64)
        np.add.at(sums, codes, vals)
        return sums
    if len(vals) and all(isinstance(v, float) for v in vals.tolist()):
        return _sum_by_group(vals.astype(np.float64), codes, ngroups)
    sums = np.zeros(ngroups, dtype=object)
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        np.add.at(sums, codes, vals)
    return sums


def _checked_int64(vals: np.ndarray, name: str) -> np.ndarray:
    """Integer sums as int64; a sum outside the bigint range fails like Spark's ANSI ``sum``."""
    if vals.dtype.kind in "iu":
        return vals.astype(np.int64, copy=False)
    for v in vals.tolist():
        if v is not None and not -_INT64_MAX - 1 <= int(v) <= _INT64_MAX:
            raise OverflowError(f"aggregation {name!r}: the sum {v} is outside the bigint range (Spark's sum overflows too)")
    return np.asarray([int(v) for v in vals.tolist()], dtype=np.int64)


def _column(values: Any, n: int) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind in "iubf" and len(values) == n:
        return values
    if isinstance(values, pd.Series):
        if values.dtype.kind in "iub":
            return values.to_numpy()
        return _object_array(values)
    if isinstance(values, np.ndarray) and values.dtype != object:
        return _object_array(pd.Series(values))
    return _obj(list(values))


def _object_array(series: pd.Series) -> np.ndarray:
    """Values as an object array with None for missing (NaN, NA)."""
    arr = series.to_numpy(dtype=object, na_value=None) if hasattr(series, "to_numpy") else np.asarray(series, dtype=object)
    if arr.dtype != object:
        arr = arr.astype(object)
    if len(arr) and series.dtype.kind == "f":
        arr[pd.isna(series).to_numpy()] = None
    return arr


def _obj(values: list) -> np.ndarray:
    # fromiter keeps tuples / lists as single objects (no broadcasting into 2-D)
    return np.fromiter(values, dtype=object, count=len(values))


def _py(value: Any) -> Any:
    value = to_python(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _py_list(values: Iterable) -> list:
    return [_py(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]


def _py_values(series: pd.Series) -> list:
    return _py_list(series.astype(object))


def _first_last(sub: pd.DataFrame, ngroups: int, first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the (t, v) pair that is smallest (first) or largest (last)."""
    t_out = np.zeros(ngroups, dtype=np.int64)
    v_out = np.empty(ngroups, dtype=object)
    if len(sub):
        ordered = sub.sort_values(["g", "t", "v"], kind="stable")
        picked = ordered.drop_duplicates("g", keep="first" if first else "last")
        idx = picked["g"].to_numpy()
        t_out[idx] = picked["t"].to_numpy().astype(np.int64)
        v_out[idx] = _py_list(picked["v"])
    return t_out, v_out


# ----------------------------------------------------------------------------------------
# State interface and the window logic.
# ----------------------------------------------------------------------------------------


class BucketState:
    """State of one bucket: ``meta`` (value), ``slices`` and ``panes`` (maps keyed by start ms).

    ``meta`` = {"w": last swept watermark, "slices": sorted slice starts with state,
    "panes": window starts with a pane-index map, "timers": registered timer times}.
    """

    def __init__(self, handle: Any, meta: Any, slices: Any, panes: Any) -> None:
        self.handle, self._meta, self._slices, self._panes = handle, meta, slices, panes
        self._slice_cache: dict[int, Optional[pd.DataFrame]] = {}

    def meta(self) -> Optional[dict]:
        row = self._meta.get()
        return None if row is None else pickle.loads(bytes(row[0]))

    def set_meta(self, meta: Optional[dict]) -> None:
        if meta is None:
            self._meta.clear()
        else:
            self._meta.update((pickle.dumps(meta, protocol=5),))

    def get_slice(self, start: int) -> Optional[pd.DataFrame]:
        if start not in self._slice_cache:
            row = self._slices.getValue((start,))
            self._slice_cache[start] = None if row is None else pickle.loads(bytes(row[0]))
        return self._slice_cache[start]

    def put_slice(self, start: int, frame: pd.DataFrame) -> None:
        self._slice_cache[start] = frame
        self._slices.updateValue((start,), (pickle.dumps(frame, protocol=5),))

    def drop_slice(self, start: int) -> None:
        self._slice_cache[start] = None
        self._slices.removeKey((start,))

    def get_panes(self, start: int) -> dict:
        row = self._panes.getValue((start,))
        return {} if row is None else pickle.loads(bytes(row[0]))

    def put_panes(self, start: int, indexes: dict) -> None:
        self._panes.updateValue((start,), (pickle.dumps(indexes, protocol=5),))

    def drop_panes(self, start: int) -> None:
        self._panes.removeKey((start,))

    def register_timer(self, ts: int) -> None:
        self.handle.registerTimer(int(ts))

    def delete_timer(self, ts: int) -> None:
        self.handle.deleteTimer(int(ts))


class WindowLogic:
    """Applies docs/semantics.md to the rows of one bucket (see the module docstring)."""

    def __init__(self, spec: EngineSpec, output_columns: list[str]) -> None:
        self.spec = spec
        self.acc = Accumulators(spec.aggregations, spec.integral_columns)
        self.keys = list(spec.keys)
        self.key_names = list(spec.key_names or spec.keys)
        self.kcols = [f"k{i}" for i in range(len(self.keys))]
        self.output_columns = output_columns

    # --- helpers ---------------------------------------------------------------------
    def _frame(self, kind: str, n: int, cols: dict) -> pd.DataFrame:
        """One output frame of one kind. Numeric numpy arrays stay typed; everything else is an
        object column: pandas 3 would infer its Arrow-backed "str" dtype for strings, which the
        transformWithStateInPandas serializer cannot convert (ChunkedArray, measured)."""
        data = {}
        for name in self.output_columns:
            if name == "kind":
                data[name] = np.full(n, kind, dtype=object)
            elif name in cols:
                data[name] = _column(cols[name], n)
            else:
                data[name] = np.full(n, None, dtype=object)
        return pd.DataFrame(data, columns=self.output_columns, copy=False)

    def _pending_events(self, meta: dict) -> list[int]:
        spec = self.spec
        w = meta["w"]
        events = set()
        starts = set()
        for s in meta["slices"]:
            starts.update(spec.windows_of_slice(s))
        for ws in starts:
            m = spec.max_ts(ws)
            if spec.emit != FINAL_ONLY and m > w:
                events.add(m)
            if m + spec.allowed_lateness_ms > w:
                events.add(m + spec.allowed_lateness_ms)
        return sorted(events)

    def _arm_timer(self, state: BucketState, meta: dict) -> None:
        events = self._pending_events(meta)
        timers = [t for t in meta["timers"] if t > meta["w"]]
        if events and not any(t <= events[0] for t in timers):
            state.register_timer(events[0])
            timers.append(events[0])
        meta["timers"] = sorted(timers)

    def _window_accs(self, state: BucketState, window_starts: list[int]) -> pd.DataFrame:
        """Per (key, window) accumulators over the window's slices: columns k*, __et_ws, accs."""
        spec = self.spec
        frames = []
        for ws in window_starts:
            for s in spec.slices_of_window(ws):
                f = state.get_slice(s)
                if f is not None and len(f):
                    frames.append(f.assign(**{C_WS: ws}))
        if not frames:
            return self.acc.empty(self.kcols + [C_WS])
        if spec.slice_ms == spec.size_ms:
            return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return self.acc.merge(frames, self.kcols + [C_WS])

    def _panes(self, accs: pd.DataFrame, timing: str, indexes: Any, finals: Any, watermark: int) -> pd.DataFrame:
        n = len(accs)
        ws = accs[C_WS].to_numpy().astype(np.int64)
        cols: dict[str, Any] = {name: accs[k].reset_index(drop=True) for name, k in zip(self.key_names, self.kcols)}
        cols.update(
            window_start=ws,
            window_end=ws + self.spec.size_ms,
            pane_timing=np.full(n, timing, dtype=object),
            pane_index=np.asarray(indexes, dtype=np.int64),
            is_final=np.asarray(finals, dtype=bool),
            watermark=np.full(n, watermark, dtype=np.int64),
        )
        cols.update(self.acc.results(accs))
        return self._frame("pane", n, cols)

    # --- step 3: the sweep -----------------------------------------------------------
    def sweep(self, state: BucketState, meta: dict, watermark: int, out: list) -> None:
        """Fire every window with ``w_prev < m <= W'``, purge every window with ``m + L <= W'``."""
        spec = self.spec
        w_prev = meta["w"]
        if watermark <= w_prev:
            return
        lateness = spec.allowed_lateness_ms
        starts = sorted({ws for s in meta["slices"] for ws in spec.windows_of_slice(s)})
        expiring = [ws for ws in starts if w_prev < spec.max_ts(ws) + lateness <= watermark]
        if spec.emit == FINAL_ONLY:
            if expiring:
                accs = self._window_accs(state, expiring)
                if len(accs):
                    n = len(accs)
                    out.append(self._panes(accs, FINAL, [0] * n, [True] * n, watermark))
        else:
            firing = [ws for ws in starts if w_prev < spec.max_ts(ws) <= watermark]
            if firing:
                accs = self._window_accs(state, firing)
                if len(accs):
                    ws_arr = accs[C_WS].to_numpy().astype(np.int64)
                    finals = (ws_arr + spec.size_ms - 1 + lateness <= watermark).tolist()
                    out.append(self._panes(accs, ON_TIME, [0] * len(accs), finals, watermark))
                    # Remember the next pane index of every (key, window) that stays alive.
                    alive = accs[~np.asarray(finals, dtype=bool)]
                    for ws, grp in alive.groupby(C_WS, sort=False):
                        keys = list(zip(*[_py_list(grp[k]) for k in self.kcols]))
                        state.put_panes(int(ws), {k: 1 for k in keys})
                        meta["panes"].add(int(ws))
            for ws in list(meta["panes"]):
                if spec.max_ts(ws) + lateness <= watermark:
                    state.drop_panes(ws)
                    meta["panes"].discard(ws)
        # Purge the slices whose last window expired.
        keep = []
        for s in meta["slices"]:
            last = spec.windows_of_slice(s)[-1]
            if spec.max_ts(last) + lateness <= watermark:
                state.drop_slice(s)
            else:
                keep.append(s)
        meta["slices"] = keep
        meta["w"] = watermark

    # --- entry points ----------------------------------------------------------------
    def on_timer(self, state: BucketState, watermark: int) -> list[pd.DataFrame]:
        meta = state.meta()
        out: list[pd.DataFrame] = []
        if meta is None or watermark <= meta["w"]:
            return out
        self.sweep(state, meta, watermark, out)
        self._arm_timer(state, meta)
        self._save_meta(state, meta)
        return out

    def end_of_input(self, state: BucketState) -> list[pd.DataFrame]:
        """The input ended: sweep to END_OF_INPUT_MS (everything fires and is purged), drop the timers."""
        meta = state.meta()
        out: list[pd.DataFrame] = []
        if meta is None:
            return out
        self.sweep(state, meta, END_OF_INPUT_MS, out)
        for ts in meta["timers"]:
            state.delete_timer(ts)
        meta["timers"] = []
        self._save_meta(state, meta)
        return out

    def _save_meta(self, state: BucketState, meta: dict) -> None:
        if not meta["slices"] and not meta["panes"]:
            # Nothing left: drop the bucket's metadata too (state rows return to 0).
            state.set_meta(None)
        else:
            meta["panes"] = set(meta["panes"])
            state.set_meta(meta)

    def on_rows(self, state: BucketState, rows: pd.DataFrame, watermark: int) -> list[pd.DataFrame]:
        spec = self.spec
        out: list[pd.DataFrame] = []
        meta = state.meta()
        if meta is None:
            meta = {"w": watermark, "slices": [], "panes": set(), "timers": []}
        elif watermark > meta["w"]:
            self.sweep(state, meta, watermark, out)  # catch-up (normally a no-op)

        rows = self._normalise(rows)
        cls = rows[C_CLS].to_numpy()
        # Stats per source partition: rows and max valid event time (data and heartbeats).
        out.append(self._stats(rows, cls, watermark))
        invalid = cls == CLS_INVALID
        if invalid.any():
            out.append(self._records(rows[invalid], "invalid", watermark, late=False))

        data = rows[cls == CLS_DATA]
        if len(data):
            ts = data[C_MS].to_numpy().astype(np.int64)
            last_ws = spec.last_start(ts, spec.slide_ms)
            live = last_ws + (spec.size_ms - 1 + spec.allowed_lateness_ms) > watermark
            if not live.all():
                out.append(self._records(data[~live], "late", watermark, late=True))
            live_rows = data[live]
            if len(live_rows):
                self._add(state, meta, live_rows, ts[live], watermark, out)
        self._arm_timer(state, meta)
        self._save_meta(state, meta)
        return out

    def _normalise(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Derive the row class and the event time in ms when Spark did not ship them."""
        spec = self.spec
        if C_CLS not in rows:
            invalid = rows[C_REASON].notna().to_numpy() if C_REASON in rows else np.zeros(len(rows), dtype=bool)
            if spec.heartbeat_column is not None and spec.heartbeat_column in rows:
                hb = rows[spec.heartbeat_column].fillna(False).to_numpy().astype(bool)
            else:
                hb = np.zeros(len(rows), dtype=bool)
            rows[C_CLS] = np.where(invalid, CLS_INVALID, np.where(hb, CLS_HEARTBEAT, CLS_DATA)).astype(np.int8)
        if C_MS not in rows:
            # invalid rows (null event time) are never read as data; 0 stands in for them
            rows[C_MS] = rows[spec.ms_column].to_numpy(dtype=np.int64, na_value=0)
        return rows

    def _add(self, state: BucketState, meta: dict, rows: pd.DataFrame, ts: np.ndarray, watermark: int, out: list) -> None:
        spec = self.spec
        frame = pd.DataFrame({k: rows[name].reset_index(drop=True) for k, name in zip(self.kcols, self.keys)})
        frame[C_SLICE] = spec.last_start(ts, spec.slice_ms)
        frame[C_MS] = ts
        for agg in spec.aggregations:
            if agg.column is not None and agg.column not in frame:
                frame[agg.column] = rows[agg.column].reset_index(drop=True)
        delta = self.acc.from_rows(frame, self.kcols + [C_SLICE], C_MS)
        slices = set(meta["slices"])
        deltas: dict[int, pd.DataFrame] = {}
        slice_values = delta[C_SLICE].to_numpy().astype(np.int64)
        order = np.argsort(slice_values, kind="stable")
        ordered = delta.drop(columns=[C_SLICE]).take(order).reset_index(drop=True)
        sorted_slices = slice_values[order]
        cuts = np.flatnonzero(np.diff(sorted_slices)) + 1
        for start, end in zip(np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(order)])).tolist()):
            s = int(sorted_slices[start])
            part = ordered.iloc[start:end].reset_index(drop=True)
            deltas[s] = part
            old = state.get_slice(s)
            merged = part if old is None else self.acc.merge([old, part], self.kcols)
            state.put_slice(s, merged)
            slices.add(s)
        meta["slices"] = sorted(slices)
        if spec.emit == FINAL_ONLY:
            return
        # LATE panes: every live, already-due window that received records in this batch.
        lateness = spec.allowed_lateness_ms
        due: set[int] = set()
        for s in deltas:
            for ws in spec.windows_of_slice(s):
                m = spec.max_ts(ws)
                if m <= watermark < m + lateness:
                    due.add(ws)
        if not due:
            return
        due_sorted = sorted(due)
        # Which (key, window) pairs were touched: keys of the batch delta in the window's slices.
        touched_frames = []
        for ws in due_sorted:
            for s in spec.slices_of_window(ws):
                if s in deltas:
                    touched_frames.append(deltas[s].assign(**{C_WS: ws}))
        touched = pd.concat(touched_frames, ignore_index=True)
        if spec.accumulation == DISCARDING:
            accs = self.acc.merge([touched], self.kcols + [C_WS]) if spec.slice_ms != spec.size_ms else touched
        else:
            accs = self._window_accs(state, due_sorted)
            tk = touched[self.kcols + [C_WS]].drop_duplicates()
            accs = accs.merge(tk, on=self.kcols + [C_WS], how="inner") if len(self.kcols) else accs
        indexes = [0] * len(accs)
        ws_list = accs[C_WS].astype(np.int64).tolist()
        key_tuples = list(zip(*[_py_list(accs[k]) for k in self.kcols])) if len(accs) else []
        by_window: dict[int, list[int]] = {}
        for row, ws in enumerate(ws_list):
            by_window.setdefault(ws, []).append(row)
        for ws, rows_idx in by_window.items():
            index_map = state.get_panes(ws) if ws in meta["panes"] else {}
            for r in rows_idx:
                k = key_tuples[r]
                indexes[r] = index_map.get(k, 0)
                index_map[k] = indexes[r] + 1
            state.put_panes(ws, index_map)
            meta["panes"].add(ws)
        out.append(self._panes(accs, LATE, indexes, [False] * len(accs), watermark))

    def _stats(self, rows: pd.DataFrame, cls: np.ndarray, watermark: int) -> pd.DataFrame:
        if C_PART in rows:
            codes, uniques = pd.factorize(rows[C_PART], use_na_sentinel=False)
            names = [None if _py(u) is None else str(_py(u)) for u in (uniques.tolist() if hasattr(uniques, "tolist") else list(uniques))]
        else:
            codes, names = np.zeros(len(rows), dtype=np.int64), [None]
        codes = np.asarray(codes)
        k = len(names)
        ts = rows[C_MS].to_numpy().astype(np.int64)
        low = np.iinfo(np.int64).min
        tmax = np.full(k, low, dtype=np.int64)
        np.maximum.at(tmax, codes, np.where(cls != CLS_INVALID, ts, low))
        counts = np.bincount(codes, minlength=k).astype(np.int64)
        return self._frame(
            "partition_stats",
            k,
            {
                "partition": names,
                "stat_max_event_time": [None if t == low else int(t) for t in tmax.tolist()],
                "stat_rows": counts,
                "watermark": np.full(k, watermark, dtype=np.int64),
            },
        )

    def _records(self, rows: pd.DataFrame, kind: str, watermark: int, late: bool) -> pd.DataFrame:
        spec = self.spec
        n = len(rows)
        cols: dict[str, Any] = {out: _py_list(rows[name]) for name, out in zip(self.keys, self.key_names)}
        raw = _py_list(rows[C_RAW]) if C_RAW in rows else [None] * n
        if late and spec.ts_column is not None and spec.ts_column in rows:
            raw = [r if r is not None else _raw_text(v) for r, v in zip(raw, rows[spec.ts_column].astype(object).tolist())]
        cols["raw_timestamp"] = raw
        # Spark reports 0 before the first watermark: no watermark yet (null), as in the
        # contract; a real one is >= 1 once a late record exists (t >= min_valid >= 1).
        cols["watermark"] = [watermark if watermark > 0 else None] * n
        # Spark ships the partition as text (its own cast) and the offset as bigint.
        cols["partition"] = _py_list(rows[C_PART]) if C_PART in rows else [None] * n
        cols["offset"] = _py_list(rows[C_OFF]) if C_OFF in rows else [None] * n
        cols["payload"] = _payloads(rows, spec.payload_columns)
        if late:
            ts = rows[C_MS].to_numpy().astype(np.int64)
            last_ws = spec.last_start(ts, spec.slide_ms)
            first_ws = last_ws - ((spec.size_ms - 1) // spec.slide_ms) * spec.slide_ms
            # first window start: the smallest start whose window still contains ts
            first_ws = np.where(first_ws + spec.size_ms > ts, first_ws, first_ws + spec.slide_ms)
            cols.update(
                reason=[TOO_LATE] * n,
                event_time=ts.tolist(),
                lateness_ms=(watermark - ts).tolist(),
                window_start=first_ws.tolist(),
                window_end=(last_ws + spec.size_ms).tolist(),
            )
        else:
            cols["reason"] = _py_list(rows[C_REASON])
        return self._frame(kind, n, cols)


def _raw_text(value: Any) -> Optional[str]:
    """The text Spark's ``cast(value as string)`` gives for a raw event-time value."""
    value = _py(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if 1e-3 <= abs(value) < 1e7 or value == 0:
            return repr(value)
        mantissa, _, exponent = np.format_float_scientific(value, unique=True, exp_digits=1).partition("e")
        if "." not in mantissa or mantissa.endswith("."):
            mantissa = mantissa.rstrip(".") + ".0"
        return f"{mantissa}E{int(exponent)}"
    if isinstance(value, pd.Timestamp):
        text = value.tz_convert("UTC").strftime("%Y-%m-%d %H:%M:%S") if value.tzinfo else value.strftime("%Y-%m-%d %H:%M:%S")
        frac = f"{value.microsecond:06d}".rstrip("0")
        return text + ("." + frac if frac else "")
    return str(value)


def _payloads(rows: pd.DataFrame, columns: Sequence[tuple[str, str]]) -> list[str]:
    """The whole original row as exact JSON (eventtime._json), one string per row."""
    present = [(c, name) for c, name in columns if c in rows]
    names = [name for _, name in present]
    data = [_py_list(rows[c].astype(object)) for c, _ in present]
    return [row_json(zip(names, values)) for values in zip(*data)] if present else ["{}"] * len(rows)


# ----------------------------------------------------------------------------------------
# Packing. PySpark's transformWithStateInPandas worker regroups its input row by row
# (itertuples + pd.DataFrame(list_of_rows), ~6 us per row for 12 columns, measured); so the
# rows are packed before the shuffle, per input Arrow batch and bucket, into one row holding
# an Arrow IPC stream (``mapInArrow``, vectorised), and unpacked in the processor.
# ----------------------------------------------------------------------------------------

C_BLOB = "et__blob"
PACKED_DDL = f"{C_BUCKET} int, {C_BLOB} binary"


class Packer:
    """``mapInArrow`` function: one output row (bucket, Arrow IPC bytes) per input batch and bucket.

    The bucket is a hash of the key columns (pandas' fixed-key hash: the same in every worker
    and process), or the ``et__bucket`` column when the input has one.
    """

    def __init__(self, key_columns: Sequence[str] = (), num_buckets: int = 1) -> None:
        self.key_columns = list(key_columns)
        self.num_buckets = int(num_buckets)

    def buckets(self, batch: Any) -> np.ndarray:
        if C_BUCKET in batch.schema.names:
            return batch.column(C_BUCKET).to_numpy(zero_copy_only=False).astype(np.int64)
        if not self.key_columns or self.num_buckets == 1:
            return np.zeros(batch.num_rows, dtype=np.int64)
        keys = pd.DataFrame({k: batch.column(k).to_pandas() for k in self.key_columns})
        hashes = pd.util.hash_pandas_object(keys, index=False).to_numpy()
        return (hashes % np.uint64(self.num_buckets)).astype(np.int64)

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            if batch.num_rows == 0:
                continue
            values = self.buckets(batch)
            order = np.argsort(values, kind="stable")
            ordered = batch.take(pa.array(order))
            values = values[order]
            cuts = np.flatnonzero(np.diff(values)) + 1
            starts = np.concatenate(([0], cuts))
            ends = np.concatenate((cuts, [len(values)]))
            out_buckets, blobs = [], []
            for start, end in zip(starts.tolist(), ends.tolist()):
                sink = pa.BufferOutputStream()
                part = ordered.slice(start, end - start)
                with pa.ipc.new_stream(sink, part.schema) as writer:
                    writer.write_batch(part)
                out_buckets.append(int(values[start]))
                blobs.append(sink.getvalue().to_pybytes())
            yield pa.RecordBatch.from_arrays(
                [pa.array(out_buckets, pa.int32()), pa.array(blobs, pa.binary())], names=[C_BUCKET, C_BLOB]
            )


pack_by_bucket = Packer()


def unpack(frames: Iterable[pd.DataFrame]) -> tuple[Optional[pd.DataFrame], bool]:
    """The rows of the packed frames (see :class:`Packer`) as one pandas DataFrame, and whether
    an end-of-input marker (an empty blob, see :func:`end_of_input_rows`) was among them."""
    import pyarrow as pa

    tables = []
    end = False
    for frame in frames:
        for blob in frame[C_BLOB].tolist():
            if not len(blob):
                end = True
                continue
            tables.append(pa.ipc.open_stream(pa.py_buffer(bytes(blob))).read_all())
    if not tables:
        return None, end
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    # Integer columns with nulls as Python ints (not float64: 2**53 + 1 must survive).
    return table.to_pandas(integer_object_nulls=True), end


def end_of_input_rows(num_buckets: int) -> list[tuple[int, bytes]]:
    """One end-of-input marker per bucket, in the packed layout: (bucket, empty blob)."""
    return [(bucket, b"") for bucket in range(num_buckets)]


# ----------------------------------------------------------------------------------------
# The StatefulProcessor (transformWithStateInPandas).
# ----------------------------------------------------------------------------------------

_BLOB = "blob binary"
_START = "start long"


class EventTimeProcessor(StatefulProcessor):
    """Event-time windows with allowed lateness; grouping key = hash bucket of the user key."""

    def __init__(self, spec: EngineSpec, output_columns: list[str]) -> None:
        self.spec = spec
        self.output_columns = list(output_columns)

    def init(self, handle: StatefulProcessorHandle) -> None:
        import os
        import time

        # EVENTTIME_PROFILE=<file>: append per-call timings (benchmark profiling only).
        self._profile = os.environ.get("EVENTTIME_PROFILE")
        self._clock = time.perf_counter
        self._t_init = self._clock()
        self._times = {"rows": 0.0, "timer": 0.0, "unpack": 0.0, "n_rows": 0, "n_calls": 0, "n_timer": 0}
        self.handle = handle
        self.logic = WindowLogic(self.spec, self.output_columns)
        self._meta = handle.getValueState("meta", _BLOB)
        self._slices = handle.getMapState("slices", _START, _BLOB)
        self._panes = handle.getMapState("panes", _START, _BLOB)

    def _state(self) -> BucketState:
        return BucketState(self.handle, self._meta, self._slices, self._panes)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        t0 = self._clock()
        batch, end = unpack(rows)
        t1 = self._clock()
        # A batch (static) query reports -1: no watermark yet, like a stream's initial 0.
        watermark = builtins.max(0, int(timerValues.getCurrentWatermarkInMs()))
        out = [] if batch is None or not len(batch) else self.logic.on_rows(self._state(), batch, watermark)
        if end:
            out += self.logic.end_of_input(self._state())
        if batch is None:
            yield from (f for f in out if len(f))
            return
        t = self._times
        t["unpack"] += t1 - t0
        t["rows"] += self._clock() - t1
        t["n_rows"] += len(batch)
        t["n_calls"] += 1
        # One frame per kind: each converts to Arrow with consistent column types.
        yield from (f for f in out if len(f))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        t0 = self._clock()
        watermark = int(timerValues.getCurrentWatermarkInMs())
        out = self.logic.on_timer(self._state(), watermark)
        self._times["timer"] += self._clock() - t0
        self._times["n_timer"] += 1
        yield from (f for f in out if len(f))

    def close(self) -> None:
        if getattr(self, "_profile", None):
            import json

            with open(self._profile, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({**self._times, "task_s": self._clock() - self._t_init}) + "\n")
