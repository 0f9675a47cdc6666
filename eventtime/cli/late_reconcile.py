"""``eventtime late reconcile``: :func:`eventtime.query.reconcile.reconcile` from the command
line, with what it did in a few lines (or JSON)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

__all__ = ["reconcile_command", "describe", "STUCK_EXIT"]

#: The exit code of a run that left records no later run reconciles by itself (any reason but
#: ``window_open``): what was written is committed, the summary says which records and why.
STUCK_EXIT = 3


def _watermark(text: str | None) -> int | None:
    if text is None:
        return None
    from ..core.trigger import END_OF_INPUT_MS
    from ..query.late import parse_instant

    if text == "end":
        return END_OF_INPUT_MS
    instant = parse_instant("--watermark", text)
    return int(instant.timestamp() * 1000)


def describe(report, results: str) -> list[str]:
    """The report for people: what was read, merged, left and how the totals moved."""
    lines = [f"pipeline {report.pipeline}: {report.late_records} too-late record(s) read"
             + (f", {report.already} reconciled before" if report.already else "")
             + f", {report.reconciled} reconciled now into {report.corrections} CORRECTION pane(s)"
             + (f" ({report.windows_merged} merging sessions)" if report.windows_merged else "")]
    for reason, ids in sorted(report.left.items()):
        shown = ", ".join(ids[:5]) + (f", ... ({len(ids) - 5} more)" if len(ids) > 5 else "")
        lines.append(f"  left unreconciled, {reason}: {len(ids)} ({shown})")
        lines.extend(f"    {why}" for why in report.why.get(reason, []))
    if report.totals_change:
        moved = ", ".join(f"{name} {v:+,.2f}" if isinstance(v, float) else f"{name} {v:+,}"
                          for name, v in report.totals_change.items())
        lines.append(f"  the totals moved: {moved}")
    if report.written:
        lines.append(f"  written to {results} as reconcile run {report.run}, in {report.seconds:.1f} s")
    elif report.skipped:
        lines.append(f"  nothing written: run {report.run} was already committed by another reconcile ({report.skipped})"
                     "; run it again")
    elif report.corrections:
        lines.append("  dry run: nothing written")
    else:
        lines.append("  nothing to write")
    return lines


def reconcile_command(args: argparse.Namespace, out: TextIO) -> int:
    from ..query.reconcile import reconcile

    options = dict(args.storage_option) if args.storage_option else None
    results = args.results
    if args.postgres:
        from ..sinks.postgres import PostgresSink
        from ..sinks.tables import recorded_pipelines

        names = sorted(recorded_pipelines(args.table, options))
        if args.pipeline is None and len(names) != 1:
            raise ValueError(f"--late {args.table!r} records the pipelines {', '.join(names) or 'none'}: pass --pipeline")
        results = PostgresSink(args.postgres, args.results, args.pipeline or names[0])
    report = reconcile(args.table, results, pipeline=args.pipeline, since=args.since,
                       watermark_ms=_watermark(args.watermark), storage_options=options, engine="rust",
                       dry_run=args.dry_run)
    if args.format == "json":
        print(json.dumps(report.to_dict(), default=str, sort_keys=True), file=out)
    else:
        print("\n".join(describe(report, args.results if not args.postgres else f"PostgreSQL table {args.results}")),
              file=out)
    # records no later run reconciles by itself (a scheduled job must see them): exit 3
    return STUCK_EXIT if report.stuck else 0
