"""The ``eventtime late`` command group: inspect and maintain a late-data Delta table.

::

    eventtime late summary  --table PATH [--format table|json|csv]
    eventtime late show     --table PATH [--reason R] [--partition P] [--key K]
                            [--since ISO] [--until ISO] [--time-column event_time|detected_at]
                            [--limit N] [--format table|json|csv]
    eventtime late plot     --table PATH --output FILE.png
    eventtime late optimize --table PATH [--vacuum] [--retention-hours H] [--dry-run]

The main ``eventtime`` parser adds the group with :func:`register`. Exit codes: 0 ok,
2 bad input (missing table, bad parameter value), 1 unexpected failure.

Because a process that read a Delta table with delta-rs can abort at interpreter
exit (delta-rs#2184, arrow#34314), the commands registered with ``hard_exit=True``
(the default) flush stdout/stderr and leave with ``os._exit(code)``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="eventtime")
    >>> _ = register(parser.add_subparsers(dest="command"), hard_exit=False)
    >>> args = parser.parse_args(["late", "summary", "--table", "/nonexistent", "--format", "json"])
    >>> args.late_command, args.format
    ('summary', 'json')

The arguments of each command: :mod:`eventtime.cli.late_args`.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
from typing import Any, Sequence, TextIO

from ..core._duration import human_ms
from .late_args import add_late_group

__all__ = ["flush_and_exit", "register", "main", "run"]

log = logging.getLogger(__name__)


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def register(subparsers: Any, hard_exit: bool = True) -> argparse.ArgumentParser:
    """Add the ``late`` command group to an ``argparse`` sub-parsers object.

    Each command sets ``args.func(args) -> int``; with ``hard_exit`` it flushes the
    output and calls ``os._exit(code)`` instead of returning.
    """
    late = add_late_group(subparsers)
    late.set_defaults(func=_hard_exit_run if hard_exit else run)
    return late


def _hard_exit_run(args: argparse.Namespace) -> int:
    code = run(args)
    flush_and_exit(code)
    return code  # pragma: no cover


def flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    logging.shutdown()
    os._exit(code)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run a parsed ``late`` command; returns the exit code (never raises for user errors)."""
    out = out or sys.stdout
    err = err or sys.stderr
    cmd = args.late_command
    try:
        from .late_reconcile import reconcile_command

        handler = {"summary": _summary, "show": _show, "plot": _plot, "advise": _advise, "optimize": _optimize,
                   "reconcile": reconcile_command}[cmd]
        return handler(args, out)
    except CliError as exc:
        print(f"eventtime late {cmd}: error: {exc}", file=err)
        return 2
    except FileNotFoundError as exc:
        print(f"eventtime late {cmd}: error: --table {args.table!r}: {exc}", file=err)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"eventtime late {cmd}: error: {exc}", file=err)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        log.debug("eventtime late %s failed", cmd, exc_info=True)
        print(f"eventtime late {cmd}: failed: {type(exc).__name__}: {exc}", file=err)
        return 1


def _options(args: argparse.Namespace) -> dict[str, str] | None:
    return dict(args.storage_option) if args.storage_option else None


def _check_table(args: argparse.Namespace) -> None:
    """A late-data table at ``--table`` (every command checks it first: exit 2 otherwise)."""
    from eventtime.query.late import NotALateTableError, open_late_table

    path = args.table
    if "://" not in path and not os.path.exists(path):
        raise CliError(f"--table {path!r}: no such path")
    try:
        open_late_table(path, _options(args))
    except FileNotFoundError:
        raise CliError(f"--table {path!r}: not a Delta table (no _delta_log)") from None
    except NotALateTableError as exc:
        raise CliError(f"--table {exc}") from None


def _read(args: argparse.Namespace, limit: int | None = None) -> Any:
    from eventtime.query.late import read_late

    _check_table(args)
    return read_late(
        args.table,
        storage_options=_options(args),
        limit=limit,
        reason=args.reason,
        kind=args.kind,
        partition=args.partition,
        key=args.key,
        since=args.since,
        until=args.until,
        time_column=args.time_column,
        pipeline=args.pipeline,
    )


def _summary(args: argparse.Namespace, out: TextIO) -> int:
    from eventtime.query.late import summarize

    summary = summarize(_read(args), top_n=args.top)
    summary["table"] = args.table
    if getattr(args, "results", None):
        from eventtime.query.reconcile import reconciliation

        summary["reconciled"] = reconciliation(args.table, args.results, args.pipeline, _options(args))
    if args.format == "json":
        json.dump(summary, out, indent=2, sort_keys=False)
        out.write("\n")
    elif args.format == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["section", "name", "value"])
        for section in ("total", "max_lateness_ms", "mean_lateness_ms", "first_detected_at", "last_detected_at"):
            w.writerow([section, "", "" if summary[section] is None else summary[section]])
        for section in ("by_kind", "by_reason", "by_partition", "by_hour", "by_event_hour"):
            for name, count in summary[section].items():
                w.writerow([section, name, count])
        for item in summary["top_keys"]:
            w.writerow(["top_keys", item["key"], item["count"]])
        for name, value in (summary.get("reconciled") or {}).items():
            w.writerow(["reconciled", name, json.dumps(value) if isinstance(value, dict) else value])
    elif not summary["total"]:
        out.write(f"late-data table {args.table}\n  no late or invalid records"
                  f"{' match the filters' if _filtered(args) else ' yet'}\n")
    else:
        lines = [
            f"late-data table {args.table}",
            f"  records           {summary['total']}",
            f"  max lateness      {_fmt_ms(summary['max_lateness_ms'])}",
            f"  mean lateness     {_fmt_ms(summary['mean_lateness_ms'])}",
            f"  detected          {summary['first_detected_at'] or '-'} .. {summary['last_detected_at'] or '-'}",
        ]
        for title, section in (("by kind", "by_kind"), ("by reason", "by_reason"),
                               ("by partition", "by_partition"), ("by hour (detected_at, UTC)", "by_hour")):
            lines.append(f"{title}:")
            if not summary[section]:
                lines.append("  -")
            width = max((len(k) for k in summary[section]), default=0)
            lines.extend(f"  {k:<{width}}  {v:>8}" for k, v in summary[section].items())
        lines.append("top keys:")
        if not summary["top_keys"]:
            lines.append("  -")
        lines.extend(f"  {item['count']:>8}  {item['key']}" for item in summary["top_keys"])
        if "reconciled" in summary:
            r = summary["reconciled"]
            moved = ", ".join(f"{k} {v:+,}" for k, v in r["totals_change"].items()) or "nothing"
            lines.append(f"reconciled ({args.results}): {r['reconciled']} of {r['too_late']} too-late records of "
                         f"pipeline {r['pipeline']}, in {r['runs']} run(s); the totals moved: {moved}")
        out.write("\n".join(lines) + "\n")
    return 0


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) for name in ("reason", "kind", "partition", "key", "since", "until", "pipeline"))


def _fmt_ms(ms: float | None) -> str:
    return "-" if ms is None else human_ms(ms)


_SHOW_COLUMNS = [
    "detected_at", "batch_id", "kind", "reason", "partition", "offset", "key",
    "event_time", "raw_timestamp", "lateness_ms", "watermark",
]


def _jsonable(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def _show(args: argparse.Namespace, out: TextIO) -> int:
    table = _read(args, limit=args.limit)
    if args.format == "json":
        rows = [{k: _jsonable(v) for k, v in r.items()} for r in table.to_pylist()]
        json.dump(rows, out, indent=2)
        out.write("\n")
        return 0
    if args.format == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(table.column_names)
        for r in table.to_pylist():
            w.writerow(["" if v is None else _jsonable(v) for v in r.values()])
        return 0
    cols = [c for c in _SHOW_COLUMNS if c in table.column_names]
    if table.num_rows == 0:
        out.write("no matching records\n")
        return 0
    import pandas as pd

    df = table.select(cols).to_pandas(types_mapper=pd.ArrowDtype)  # ints stay ints, nulls show as <NA>
    out.write(df.to_string(index=False, max_colwidth=40) + "\n")
    out.write(f"({table.num_rows} record(s){', limit reached' if table.num_rows == args.limit else ''})\n")
    return 0


def _plot(args: argparse.Namespace, out: TextIO) -> int:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    output = args.output
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise CliError(f"--output {output!r}: directory {parent!r} does not exist")
    if os.path.isdir(output):
        raise CliError(f"--output {output!r} is a directory; give a file name such as {os.path.join(output, 'late.png')!r}")
    table = _read(args)
    fig = plot_figure(table.to_pandas(), args.time_column, args.table)
    fig.savefig(output, format="png", dpi=100)
    plt.close(fig)
    out.write(f"wrote {output} ({table.num_rows} record(s))\n")
    return 0


def plot_figure(df: Any, time_col: str, title: str) -> Any:
    """The late-data figure: records over time by reason, and the lateness histogram.

    The time axis spans the records' own times (plus one bin on each side), not whatever
    matplotlib picks for one or two points (which can be years)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7))
    fig.suptitle(f"late data: {title}")
    if len(df) and time_col in df and df[time_col].notna().any():
        ts = df[df[time_col].notna()]
        span = ts[time_col].max() - ts[time_col].min()
        freq = "1min" if span <= pd.Timedelta(hours=3) else "1h" if span <= pd.Timedelta(days=7) else "1D"
        counts = ts.groupby([pd.Grouper(key=time_col, freq=freq), "reason"]).size().unstack(fill_value=0)
        for reason in counts.columns:
            ax1.plot(counts.index, counts[reason], marker="o", markersize=3, label=str(reason))
        bin_width = pd.Timedelta(freq)
        ax1.set_xlim(counts.index.min() - bin_width, counts.index.max() + bin_width)
        ax1.legend(loc="upper left")
        ax1.set_ylabel(f"records per {freq}")
    else:
        ax1.text(0.5, 0.5, "no records", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_title(f"late and invalid records over {time_col} (UTC) by reason")
    lat = df["lateness_ms"].dropna() if "lateness_ms" in df else pd.Series(dtype="float64")
    if len(lat):
        ax2.hist(lat.astype("float64") / 1000.0, bins=min(50, max(5, len(lat) // 2)))
        ax2.set_xlabel("lateness (s) = watermark - event_time")
        ax2.set_ylabel("records")
    else:
        ax2.text(0.5, 0.5, "no late records", ha="center", va="center", transform=ax2.transAxes)
    ax2.set_title("lateness histogram (too_late records)")
    fig.tight_layout()
    return fig


def _optimize(args: argparse.Namespace, out: TextIO) -> int:
    from ..sinks.tables import compact

    _check_table(args)
    if (args.retention_hours is not None or args.dry_run) and not args.vacuum:
        raise CliError("--retention-hours/--dry-run need --vacuum")
    result = compact(
        args.table,
        storage_options=_options(args),
        target_size=args.target_size,
        vacuum=args.vacuum,
        retention_hours=args.retention_hours,
        dry_run=args.dry_run,
    )
    m = result["compact"]
    if args.format == "json":
        json.dump({"table": args.table, **result}, out, indent=2, default=str)
        out.write("\n")
    else:
        out.write(
            f"compacted {args.table}: {m.get('numFilesRemoved', 0)} file(s) -> {m.get('numFilesAdded', 0)} file(s), "
            f"{m.get('partitionsOptimized', 0)} partition(s)\n"
        )
        if args.vacuum:
            verb = "would remove" if args.dry_run else "removed"
            out.write(f"vacuum {verb} {len(result['vacuumed'])} file(s)\n")
    return 0


def _advise(args: argparse.Namespace, out: TextIO) -> int:
    from deltalake import DeltaTable

    from ..query.advise import DEFAULT_TARGETS, advise
    from ..query.advise_text import describe, plot_delays
    from ..query.late import NotALateTableError

    def is_delta(path: str) -> bool:
        try:
            return bool(DeltaTable.is_deltatable(path, options))
        except Exception:  # noqa: BLE001 - an unreachable store: not a table we can read
            return False

    options = _options(args)
    targets = tuple(args.target) if args.target else DEFAULT_TARGETS
    for t in targets:
        if not 0 < t <= 1:
            raise CliError(f"--target must be a share in (0, 1], got {t}")
    how = "DeltaLateSink(path) writes one at <path>_delays by default (older jobs: route(..., delays=DeltaDelaySink(path)))"
    table = args.table.rstrip("/")
    beside = (table.rsplit("/", 1)[0] + "/delays" if "://" in table
              else os.path.join(os.path.dirname(os.path.abspath(table)), "delays"))
    tried = [args.delays] if args.delays else [table + "_delays", beside]
    delays = next((path for path in tried if is_delta(path)), None)
    if delays is None and args.delays:
        raise CliError(f"--stats {args.delays!r} is not a delay table (no Delta table there); {how}")
    if delays is None:
        raise CliError(f"no delay table at {tried[0]!r} or {tried[1]!r}: {how}; or give --stats PATH")
    if args.results and not is_delta(args.results):
        raise CliError(f"--results {args.results!r}: no Delta table there (give the results table)")
    if args.plot and os.path.isdir(args.plot):
        raise CliError(f"--plot {args.plot!r} is a directory; give a file name such as delays.png")
    late = args.table if is_delta(args.table) else None
    try:
        advice = advise(delays, targets, results=args.results, pipeline=args.pipeline, storage_options=options, late=late)
    except NotALateTableError as exc:
        raise CliError(f"--table {exc}") from None
    if args.plot:
        plot_delays(advice, args.plot)
    if args.format == "json":
        out.write(json.dumps({**advice.to_json(), "late_records_in_table": advice.late_records, "plot": args.plot},
                             default=str) + "\n")
        return 0
    out.write(describe(advice) + "\n")
    if late is None:
        out.write(f"  no late table at {args.table!r}: the late records' counts and partitions need it\n")
    if args.plot:
        out.write(f"wrote {args.plot}\n")
    return 0


def main(argv: Sequence[str] | None = None, hard_exit: bool = True) -> int:
    """Stand-alone entry: ``python -m eventtime.cli.late late summary --table PATH``."""
    parser = argparse.ArgumentParser(prog="eventtime")
    subparsers = parser.add_subparsers(dest="command")
    subparsers.required = True
    register(subparsers, hard_exit=False)
    args = parser.parse_args(argv)
    code = args.func(args)
    if hard_exit:
        flush_and_exit(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    main()
