"""The arguments of the ``eventtime late`` commands (summary, show, plot, advise, optimize, reconcile);
what each command does: :mod:`eventtime.cli.late`."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..core.kinds import RECORD_KINDS
from ..core.timestamps import INVALID_REASONS, PARTLY_LATE, TOO_LATE

__all__ = ["add_late_group", "REASONS"]

REASONS = (TOO_LATE, PARTLY_LATE, *INVALID_REASONS)


def _iso_arg(name: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        from eventtime.query.late import parse_instant

        try:
            return parse_instant(name, text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name
    return parse


def _positive_int(name: str, minimum: int = 0) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {value}")
        return value

    parse.__name__ = name
    return parse


def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--storage-option must be KEY=VALUE, got {text!r}")
    return key, value


def add_late_group(subparsers: Any) -> argparse.ArgumentParser:
    """The ``late`` group and its commands' arguments, on an ``argparse`` sub-parsers object."""
    late = subparsers.add_parser("late", help="inspect and maintain a late-data Delta table")
    sub = late.add_subparsers(dest="late_command", metavar="{summary,show,plot,advise,optimize,reconcile}")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--table", required=True, metavar="PATH", help="late-data Delta table path or URI")
        p.add_argument(
            "--storage-option", action="append", type=_storage_option, default=[], metavar="KEY=VALUE",
            help="delta-rs storage option (repeatable)",
        )

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reason", action="append", choices=REASONS, metavar="REASON",
                       help=f"filter on reason (repeatable): {', '.join(REASONS)}")
        p.add_argument("--kind", action="append", choices=list(RECORD_KINDS), help="filter on kind")
        p.add_argument("--partition", action="append", help="filter on source partition (repeatable)")
        p.add_argument("--key", help='key filter: JSON object, col=value, or a value')
        p.add_argument("--since", type=_iso_arg("--since"), help="inclusive lower time bound (ISO-8601, naive = UTC)")
        p.add_argument("--until", type=_iso_arg("--until"), help="exclusive upper time bound (ISO-8601)")
        p.add_argument(
            "--time-column", choices=["event_time", "detected_at"], default="detected_at",
            help="column --since/--until apply to (default detected_at: invalid records have no event time)",
        )
        p.add_argument("--pipeline", help="filter on pipeline name")

    p = sub.add_parser("summary", help="counts by reason, partition, hour; worst lateness; top keys")
    common(p)
    filters(p)
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    p.add_argument("--top", type=_positive_int("--top", 1), default=10, help="number of top keys")
    p.add_argument("--results", metavar="PATH", help="the pipeline's results table: adds how many too-late records "
                                                     "reconcile merged, and how much that moved the totals")

    p = sub.add_parser("show", help="list late/invalid records")
    common(p)
    filters(p)
    p.add_argument("--limit", type=_positive_int("--limit"), default=50)
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")

    p = sub.add_parser("plot", help="PNG: late records over time by reason + lateness histogram")
    common(p)
    filters(p)
    p.add_argument("--output", required=True, metavar="FILE.png")

    p = sub.add_parser("advise", help="the L that would have kept 99 / 99.9 / 99.99 %% of records on time, "
                                      "what it costs, and the partitions behind it")
    common(p)
    p.add_argument("--stats", "--delays", dest="delays", metavar="PATH",
                   help="delay table (default: '<--table>_delays', which DeltaLateSink writes, else 'delays' "
                        "beside --table, which route(..., delays=DeltaDelaySink(path)) wrote in older jobs)")
    p.add_argument("--results", metavar="PATH", help="results table: adds the windows, for the state cost in all")
    p.add_argument("--target", action="append", type=float, metavar="SHARE",
                   help="on-time share to advise for, e.g. 0.999 (repeatable; default 0.99, 0.999, 0.9999)")
    p.add_argument("--pipeline", help="only this pipeline's delays, late records and windows")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--plot", metavar="FILE.png", help="also plot the delay distribution with B and B + L marked")

    p = sub.add_parser("optimize", help="compact small files (and optionally vacuum)")
    common(p)
    p.add_argument("--target-size", type=_positive_int("--target-size", 1), help="target file size in bytes")
    p.add_argument("--vacuum", action="store_true", help="also vacuum unreferenced files")
    p.add_argument("--retention-hours", type=_positive_int("--retention-hours"), help="vacuum retention")
    p.add_argument("--dry-run", action="store_true", help="vacuum: list files only")
    p.add_argument("--format", choices=["table", "json"], default="table")

    p = sub.add_parser("reconcile", help="merge the too-late records into the results table as CORRECTION panes "
                                         "(exactly once), so that the results equal a batch run over all the data",
                       epilog="exit codes: 0 every record reconciled (or left only for windows still open); 3 records "
                              "left that no later run reconciles by itself (the summary says which and why); "
                              "2 a usage error; 1 a failure")
    p.add_argument("--late", "--table", dest="table", required=True, metavar="PATH", help="late-data Delta table")
    p.add_argument("--results", required=True, metavar="PATH|TABLE",
                   help="the pipeline's results: a Delta table, or with --postgres the PostgreSQL table")
    p.add_argument("--postgres", metavar="CONNINFO", help="the results are PostgresSink's table in this database")
    p.add_argument("--pipeline", help="the pipeline (needed when the tables hold several)")
    p.add_argument("--since", type=_iso_arg("--since"), help="only late records detected at or after (ISO-8601)")
    p.add_argument("--watermark", metavar="ISO|end",
                   help="the stream's watermark, when known ('end': the stream ended); default: what the tables prove")
    p.add_argument("--dry-run", action="store_true", help="plan and report, write nothing")
    p.add_argument("--storage-option", action="append", type=_storage_option, default=[], metavar="KEY=VALUE",
                   help="delta-rs storage option (repeatable)")
    p.add_argument("--format", choices=["text", "json"], default="text")

    return late
