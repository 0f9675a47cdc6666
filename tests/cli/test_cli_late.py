"""The `eventtime late` command group (in-process, plus one real subprocess for the hard exit)."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eventtime.cli import late as cli_late
from eventtime.sinks import DeltaLateSink

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def batch(reasons, partitions, lateness, start):
    n = len(reasons)
    return pa.table({
        "kind": ["late" if r == "too_late" else "invalid" for r in reasons],
        "reason": reasons,
        "key": [json.dumps({"device": f"d{(start + i) % 2}"}, separators=(",", ":")) for i in range(n)],
        "event_time": pa.array([T0 - dt.timedelta(seconds=lat // 1000) if lat is not None else None
                                for lat in lateness], pa.timestamp("us", tz="UTC")),
        "raw_timestamp": ["0" if r == "before_min_valid" else "x" for r in reasons],
        "lateness_ms": pa.array(lateness, pa.int64()),
        "partition": partitions,
        "offset": pa.array(range(start, start + n), pa.int64()),
        "payload": ["{}"] * n,
    })


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "late")
    clock = iter([T0, T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=1, minutes=5)])
    sink = DeltaLateSink(path, pipeline="sensors", now=lambda: next(clock))
    sink(batch(["too_late", "too_late", "before_min_valid"], ["0", "1", "1"], [5_000, 45_000, None], 0), 0, "q")
    sink(batch(["too_late", "null_timestamp"], ["1", None], [125_000, None], 3), 1, "q")
    sink(batch(["too_late"], ["0"], [1_000], 5), 2, "q")
    return path


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    parser = argparse.ArgumentParser(prog="eventtime")
    cli_late.register(parser.add_subparsers(dest="command"), hard_exit=False)
    args = parser.parse_args(argv)
    code = cli_late.run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_summary_json_numbers(table):
    code, out, err = run(["late", "summary", "--table", table, "--format", "json"])
    assert code == 0, err
    s = json.loads(out)
    assert s["total"] == 6
    assert s["by_reason"] == {"too_late": 4, "before_min_valid": 1, "null_timestamp": 1}
    assert s["by_partition"] == {"1": 3, "0": 2, "(none)": 1}
    assert s["max_lateness_ms"] == 125_000
    assert s["by_hour"] == {"2024-05-01T08:00:00+00:00": 3, "2024-05-01T09:00:00+00:00": 3}
    assert s["top_keys"][0]["count"] == 3
    assert sum(k["count"] for k in s["top_keys"]) == 6


def test_summary_table_and_csv(table):
    code, out, _ = run(["late", "summary", "--table", table])
    assert code == 0
    assert "records           6" in out and "max lateness      2 min 5 s" in out and "too_late" in out
    code, out, _ = run(["late", "summary", "--table", table, "--format", "csv", "--reason", "too_late"])
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["section", "name", "value"]
    assert ["total", "", "4"] in rows and ["by_reason", "too_late", "4"] in rows


def test_show_filters(table):
    code, out, err = run(["late", "show", "--table", table, "--format", "json", "--partition", "1",
                          "--reason", "too_late"])
    assert code == 0, err
    got = json.loads(out)
    assert sorted(r["offset"] for r in got) == [1, 3]
    assert all(r["pipeline"] == "sensors" for r in got)
    code, out, _ = run(["late", "show", "--table", table, "--format", "json", "--key", "device=d1"])
    assert sorted(r["offset"] for r in json.loads(out)) == [1, 3, 5]
    code, out, _ = run(["late", "show", "--table", table, "--format", "json",
                        "--since", "2024-05-01T09:00:00Z", "--until", "2024-05-01T09:01:00Z"])
    assert sorted(r["offset"] for r in json.loads(out)) == [3, 4]
    code, out, _ = run(["late", "show", "--table", table, "--limit", "2"])
    assert code == 0 and "(2 record(s), limit reached)" in out
    code, out, _ = run(["late", "show", "--table", table, "--format", "csv", "--reason", "malformed_record"])  # a reason no row has
    assert code == 0 and out.count("\n") == 1  # header only


def test_missing_table_is_exit_2_with_message(tmp_path):
    missing = str(tmp_path / "nope")
    code, out, err = run(["late", "summary", "--table", missing])
    assert code == 2 and out == ""
    assert "--table" in err and missing in err and "Traceback" not in err
    os.makedirs(missing)
    code, _, err = run(["late", "show", "--table", missing])
    assert code == 2 and "not a Delta table" in err


def test_bad_parameter_values_name_the_parameter(table, capsys):
    with pytest.raises(SystemExit) as info:
        run(["late", "show", "--table", table, "--since", "yesterday"])
    assert info.value.code == 2
    assert "--since" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(["late", "show", "--table", table, "--limit", "-3"])
    assert "--limit must be >= 0, got -3" in capsys.readouterr().err
    code, _, err = run(["late", "show", "--table", table, "--since", "2024-05-02", "--until", "2024-05-01"])
    assert code == 2 and "since" in err
    code, _, err = run(["late", "plot", "--table", table, "--output", "/nonexistent-dir/x.png"])
    assert code == 2 and "--output" in err


def test_plot_writes_a_png(table, tmp_path):
    out_file = str(tmp_path / "late.png")
    code, out, err = run(["late", "plot", "--table", table, "--output", out_file])
    assert code == 0, err
    with open(out_file, "rb") as fh:
        data = fh.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_optimize(tmp_path, table):
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(table, copy)
    assert len(DeltaTable(copy).file_uris()) == 3
    code, out, err = run(["late", "optimize", "--table", copy, "--format", "json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["compact"]["numFilesRemoved"] == 3 and result["compact"]["numFilesAdded"] == 1
    assert len(DeltaTable(copy).file_uris()) == 1
    code, _, err = run(["late", "optimize", "--table", copy, "--dry-run"])
    assert code == 2 and "--vacuum" in err
    code, out, err = run(["late", "optimize", "--table", copy, "--vacuum", "--dry-run"])
    assert code == 0 and "would remove 0 file(s)" in out


def _python_module(*argv):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "eventtime.cli.late", *argv], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)


def test_real_process_hard_exit(table):
    """The real command flushes its output and exits with os._exit (no abort at exit)."""
    proc = _python_module("late", "summary", "--table", table, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total"] == 6
    proc = _python_module("late", "summary", "--table", table + "-missing")
    assert proc.returncode == 2
    assert "--table" in proc.stderr and "Traceback" not in proc.stderr


def test_plot_time_axis_spans_the_records_not_years():
    """A one-minute run has one point per reason; matplotlib alone widens that to ~4 years."""
    import matplotlib.dates as mdates
    import pandas as pd

    t = pd.Timestamp("2024-05-01 08:00:10", tz="UTC")
    df = pd.DataFrame({"detected_at": [t, t + pd.Timedelta(seconds=20)], "reason": ["too_late", "too_late"],
                       "lateness_ms": [1000, 2000]})
    fig = cli_late.plot_figure(df, "detected_at", "t")
    lo, hi = (mdates.num2date(x) for x in fig.axes[0].get_xlim())
    assert lo >= t - pd.Timedelta(minutes=2) and hi <= t + pd.Timedelta(minutes=2), (lo, hi)


def test_summary_of_a_table_that_is_not_a_late_table_is_an_error(tmp_path):
    from eventtime.sinks import DeltaResultsSink

    path = str(tmp_path / "results")
    DeltaResultsSink(path, pipeline="p")(pa.table({
        "user": ["a"], "window_start": pa.array([T0], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([T0], pa.timestamp("us", tz="UTC")), "pane_timing": ["ON_TIME"],
        "pane_index": pa.array([0], pa.int64()), "is_final": [True], "count": pa.array([1], pa.int64())}), 0, "q")
    code, out, err = run(["late", "summary", "--table", path])
    assert code == 2 and out == ""
    assert "is not a late-data table (it looks like a results table" in err and "reason" in err


def test_an_unknown_reason_is_an_error_listing_the_valid_ones(table):
    with pytest.raises(SystemExit) as info:
        run(["late", "show", "--table", table, "--reason", "too-late"])
    assert info.value.code == 2


def test_unknown_reason_message_lists_reasons(table, capsys):
    with pytest.raises(SystemExit):
        run(["late", "show", "--table", table, "--reason", "toolate"])
    err = capsys.readouterr().err
    assert "invalid choice: 'toolate'" in err and "too_late" in err and "null_timestamp" in err


def test_plot_to_a_directory_is_refused_before_reading(table, tmp_path):
    code, out, err = run(["late", "plot", "--table", table, "--output", str(tmp_path)])
    assert code == 2 and out == ""
    assert f"--output {str(tmp_path)!r} is a directory; give a file name such as" in err
