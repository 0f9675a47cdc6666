"""The lateness advisor: delay bins, the advice from a histogram, and the CLI on a real delay table."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from eventtime.query.advise import advise, advise_counts, bin_bounds, delay_bin, plot_delays


def test_every_delay_falls_in_its_bin_and_the_bins_tile_the_line():
    for d in [*range(-3, 5000), *(2**k + j for k in range(12, 62) for j in (-1, 0, 1))]:
        low, high = bin_bounds(delay_bin(d))
        assert low <= max(d, 0) < high, d
    for b in range(0, 480):
        assert bin_bounds(b)[1] == bin_bounds(b + 1)[0]
        low, high = bin_bounds(b)
        if b >= 8:
            assert high - low <= low / 8


def test_advice_from_a_histogram_at_its_bin_edges():
    # 990 records 1 s behind, 9 records 100 s behind, 1 record 1000 s behind; B = 10 s, L = 60 s
    hist = {delay_bin(1_000): 990, delay_bin(100_000): 9, delay_bin(1_000_000): 1}
    advice = advise_counts(hist, 10_000, 60_000, targets=(0.99, 0.999, 1.0), windows=10)
    assert advice.records == 1000 and advice.current_at_risk == 10
    t99, t999, t100 = advice.choices
    assert (t99.b_ms, t99.l_ms, t99.still_late) == (1_024, 0, 10)  # B + L = the upper edge of 1 s's bin
    assert t999.b_ms + t999.l_ms == bin_bounds(delay_bin(100_000))[1] and t999.still_late == 1
    assert (t999.b_ms, t999.extra_hold_ms) == (10_000, t999.l_ms - 60_000)
    assert t999.extra_window_ms == 10 * t999.extra_hold_ms
    assert t100.still_late == 0 and t100.b_ms + t100.l_ms == bin_bounds(delay_bin(1_000_000))[1]
    text = advice.describe()
    assert "99.90% on time: B = 10000 ms" in text and "still late at most 1" in text
    with pytest.raises(ValueError, match="targets must be shares in \\(0, 1\\], got 1.5"):
        advise_counts(hist, targets=(1.5,))


def test_advise_reads_a_delay_table_and_the_cli_prints_json_and_a_plot(tmp_path):
    from eventtime.cli.late import main
    from eventtime.sinks import DeltaDelaySink, DeltaLateSink

    sink = DeltaDelaySink(str(tmp_path / "delays"), pipeline="p")
    for batch, rows in enumerate([{0: 50, delay_bin(5_000): 10}, {0: 30, delay_bin(500_000): 2}]):
        sink(pa.table({"partition": ["0"] * len(rows), "delay_bin": pa.array(list(rows), pa.int32()),
                       "records": pa.array(list(rows.values()), pa.int64()),
                       "max_out_of_orderness_ms": pa.array([1_000] * len(rows), pa.int64()),
                       "allowed_lateness_ms": pa.array([60_000] * len(rows), pa.int64())}), batch, "q")
    advice = advise(str(tmp_path / "delays"), targets=(0.95,))
    assert advice.records == 92 and advice.histogram == {0: 80, delay_bin(5_000): 10, delay_bin(500_000): 2}
    assert (advice.current_b_ms, advice.current_l_ms, advice.current_at_risk) == (1_000, 60_000, 2)
    DeltaLateSink(str(tmp_path / "late"), pipeline="p")(pa.table({"kind": ["late"], "reason": ["too_late"]}), 0, "q")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["late", "advise", "--table", str(tmp_path / "late"), "--format", "json", "--target", "0.99",
                     "--plot", str(tmp_path / "d.png")], hard_exit=False)
    assert code == 0
    data = json.loads(out.getvalue())
    assert data["records"] == 92 and data["late_records_in_table"] == 1
    assert data["choices"][0]["target"] == 0.99 and data["choices"][0]["still_late"] == 0
    assert {"bin": 0, "low_ms": 0, "high_ms": 1, "records": 80} in data["histogram"]
    assert (tmp_path / "d.png").stat().st_size > 1000
    plot_delays(advice, str(tmp_path / "e.png"))


def test_advise_names_a_missing_delay_table(tmp_path, capsys):
    from eventtime.cli.late import main

    assert main(["late", "advise", "--table", str(tmp_path / "late"), "--stats", str(tmp_path / "nope")],
                hard_exit=False) == 2
    assert "--stats" in capsys.readouterr().err
