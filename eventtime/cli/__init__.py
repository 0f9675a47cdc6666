"""The ``eventtime`` command: ``replay``, ``demo`` and ``late`` (summary, show, plot, optimize)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from ..core.watermark import GLOBAL, PER_PARTITION
from ..harness.scenario import ScenarioError, load_scenario, run_reference


def _replay(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.scenario)
    except FileNotFoundError:
        print(f"eventtime replay: scenario file not found: {args.scenario}", file=sys.stderr)
        return 2
    except ScenarioError as exc:
        print(f"eventtime replay: {exc}", file=sys.stderr)
        return 2
    if args.engine == "reference":
        output = run_reference(scenario, merged_from=args.merged_from)
    else:
        from ..spark.replay import run_scenario

        output = run_scenario(scenario, merged_from=args.merged_from)
    json.dump(output, sys.stdout, indent=2 if args.pretty else None)
    sys.stdout.write("\n")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ..ops.compat import IncompatibleRestartError
    from .demo import DemoError, run_demo

    try:
        report = run_demo(args.output, seed=args.seed, rows=args.rows, batches=args.batches, fresh_start=args.fresh_start,
                          bounded_jobs=not args.streaming_only, watermark=args.watermark, source=args.source)
        code = 0 if report.holds else 1
    except (DemoError, IncompatibleRestartError, ValueError, TypeError) as exc:
        print(f"eventtime demo: {exc}", file=sys.stderr)
        code = 2
    return code


def _positive(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        return value

    return parse


def build_parser(hard_exit: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eventtime",
        description="Event-time windowing with allowed lateness and a late-data side output for PySpark.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = sub.add_parser("replay", help="run a scenario file through an engine and print the panes as JSON")
    replay.add_argument("scenario", help="scenario JSON file (see docs/replay.md)")
    replay.add_argument("--engine", choices=("reference", "spark"), default="reference", help="default: reference")
    replay.add_argument("--pretty", action="store_true", help="indent the JSON output")
    replay.add_argument("--merged-from", action="store_true",
                        help="session panes also list the bounds of the earlier panes they replace")
    replay.set_defaults(func=_replay)

    demo = sub.add_parser("demo", help="run the whole pipeline on a generated stream (local Spark, Delta tables)")
    demo.add_argument("--output", default="demo-output", help="directory for input, checkpoint and tables (default: demo-output)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the generated stream (default: 7)")
    demo.add_argument("--rows", type=_positive("--rows"), default=40_000, help="data rows (default: 40000)")
    demo.add_argument("--batches", type=_positive("--batches"), default=20, help="micro-batches (default: 20)")
    demo.add_argument("--fresh-start", action="store_true",
                      help="discard the checkpoint and tables of an earlier run in --output and start over")
    demo.add_argument("--watermark", choices=(GLOBAL, PER_PARTITION), default=GLOBAL,
                      help="how the watermark moves: the global maximum (default) or per source partition")
    demo.add_argument("--source", choices=("files", "kafka"), default="files",
                      help="read the stream from JSON files (default) or from a local Kafka broker started for the "
                           "run (a 4-partition topic; needs the pyspark 4.2 environment: `make demo-kafka`)")
    demo.add_argument("--streaming-only", action="store_true",
                      help="run only the streaming query, not the bounded session and calendar-day jobs after it")
    demo.set_defaults(func=_demo)

    from .late import register as register_late

    register_late(sub, hard_exit=hard_exit)
    return parser


def _leave(code: int) -> None:
    """End the process with ``code`` once a command's work is done: Spark stopped cleanly,
    output flushed, and no interpreter exit hooks, which can abort after delta-rs was used
    ("terminate called without an active exception", exit 134, an upstream problem)."""
    if "pyspark" in sys.modules:
        try:
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
            if session is not None:
                session.stop()
        except Exception:  # noqa: BLE001 - the command's result stands
            pass
    from .late import flush_and_exit

    flush_and_exit(code)


def main(argv: Optional[Sequence[str]] = None, hard_exit: bool = False) -> int:
    """Run the command line and return its exit code; ``hard_exit=True`` ends the process with
    it instead (see :func:`_leave`), as the ``eventtime`` command does."""
    args = build_parser(hard_exit=hard_exit).parse_args(argv)
    code = args.func(args)
    if hard_exit:
        _leave(code)
    return code


def console() -> None:
    """The ``eventtime`` command (and ``python -m eventtime``): :func:`main`, then the process
    ends with its exit code once the work is done."""
    main(hard_exit=True)


if __name__ == "__main__":
    console()
