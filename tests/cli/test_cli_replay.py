"""The `eventtime replay` command: the fixed JSON contract and clear errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import load_transcript, transcript_paths

from eventtime.cli import main
from eventtime.harness.scenario import diff_outputs

ROOT = Path(__file__).resolve().parents[2]


def test_replay_prints_the_expected_json(capsys):
    path = transcript_paths()[1]
    scenario, expected = load_transcript(path)
    assert main(["replay", str(ROOT / "examples" / "scenarios" / "allowed_lateness.json")]) == 0
    output = json.loads(capsys.readouterr().out)
    assert diff_outputs(expected, output) is None


def test_replay_console_script_runs_in_a_subprocess(tmp_path):
    scenario, expected = load_transcript(transcript_paths()[0])
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    done = subprocess.run([sys.executable, "-m", "eventtime.cli", "replay", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert diff_outputs(expected, json.loads(done.stdout)) is None


@pytest.mark.parametrize(
    "scenario, message",
    [
        ({"window": {"type": "tumbling", "size_ms": 1000}, "batches": [], "colour": 1}, "unknown field(s) ['colour']"),
        ({"window": {"type": "hopping", "size_ms": 1000}, "batches": []}, "window.type must be"),
        ({"window": {"type": "tumbling", "size_ms": 0}, "batches": []}, "size must be > 0"),
        ({"window": {"type": "sliding", "size_ms": 1000}, "batches": []}, "window.slide_ms is required"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "batches": [[{"key": "a"}]]}, "batches[0][0].ts is required"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "batches": [[{"ts": 1, "amount": 2}]]}, "unknown field(s) ['amount']"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "allowed_lateness_ms": "1 minute", "batches": []}, "allowed_lateness_ms must be an integer"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "emit": "sometimes", "batches": []}, "emit must be one of"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "tz": "Mars/Olympus", "batches": []}, "scenario.tz must be a fixed UTC offset"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "tz": "UTC+25", "batches": []}, "scenario.tz must be between UTC-14:00 and UTC+14:00, got 'UTC+25'"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "tz": 8, "batches": []}, "scenario.tz must be a zone name"),
        ({"window": {"type": "tumbling", "size_ms": 1000}, "TZ": "UTC+8", "batches": []}, "unknown field(s) ['TZ']"),
    ],
)
def test_bad_scenarios_fail_with_a_message_naming_the_field(tmp_path, capsys, scenario, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(scenario))
    assert main(["replay", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_missing_file_and_bad_json(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "nope.json")]) == 2
    assert "not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["replay", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def _local_scenario(**extra) -> dict:
    return {
        "window": {"type": "tumbling", "size_ms": 86_400_000},
        "min_valid_ms": 1,
        "now_ms": 1_800_000_000_000,
        "batches": [
            [{"key": "a", "ts": "2024-05-01 07:00:00", "value": 1}, {"key": "a", "ts": "2024-05-01T09:00:00+08:00", "value": 2}],
            [{"key": "a", "ts": "2024-05-02 08:30:00", "value": 4}],
        ],
        **extra,
    }


def test_replay_reads_strings_without_an_offset_in_the_scenario_tz(tmp_path, capsys):
    outputs = {}
    for tz in (None, "UTC+8", "Asia/Shanghai"):
        path = tmp_path / f"{tz}.json".replace("/", "_")
        path.write_text(json.dumps(_local_scenario(**({} if tz is None else {"tz": tz}))))
        assert main(["replay", "--engine", "reference", str(path)]) == 0
        outputs[tz] = json.loads(capsys.readouterr().out)
    assert diff_outputs(outputs["UTC+8"], outputs["Asia/Shanghai"]) is None
    # UTC+8: 07:00 local is 2024-04-30T23:00Z, in the day before 09:00+08:00 (01:00Z); the
    # watermark after the second batch is 08:30 local = 00:30Z, which closes the day of 01:00Z.
    panes = {p["window_start"]: p["sum"] for batch in outputs["UTC+8"]["batches"] for p in batch["panes"]}
    assert panes == {1714435200000: 1, 1714521600000: 2}  # 2024-04-30 and 2024-05-01 UTC
    assert outputs["UTC+8"]["batches"][1]["watermark_ms"] == 1714609800000  # 2024-05-02T00:30Z
    # Without tz the same strings are UTC (as before): 07:00Z and 01:00Z share 2024-05-01.
    panes = {p["window_start"]: p["sum"] for batch in outputs[None]["batches"] for p in batch["panes"]}
    assert panes == {1714521600000: 3}
    assert outputs[None]["batches"][1]["watermark_ms"] == 1714638600000  # 2024-05-02T08:30Z


def test_replay_of_sessions_keeps_the_contract_and_adds_merged_from_on_request(capsys):
    """Session panes have the contract's fields (bounds in window_start / window_end);
    --merged-from adds the bounds each pane replaces."""
    import json

    path = str(ROOT / "examples" / "scenarios" / "sessions.json")
    assert main(["replay", path]) == 0
    plain = json.loads(capsys.readouterr().out)
    fields = {"key", "window_start", "window_end", "timing", "index", "is_final", "count", "sum"}
    panes = [p for b in plain["batches"] for p in b["panes"]]
    assert panes and all(set(p) == fields for p in panes)
    assert main(["replay", path, "--merged-from"]) == 0
    detailed = json.loads(capsys.readouterr().out)
    merged = [p["merged_from"] for b in detailed["batches"] for p in b["panes"]]
    assert [[200, 226]] in merged and [[195, 226]] in merged
    for b_plain, b_detailed in zip(plain["batches"], detailed["batches"]):
        assert [{k: v for k, v in p.items() if k != "merged_from"} for p in b_detailed["panes"]] == b_plain["panes"]


def test_replay_of_calendar_days(capsys):
    import json

    assert main(["replay", str(ROOT / "examples" / "scenarios" / "calendar_berlin_dst.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    lengths = sorted({(p["window_end"] - p["window_start"]) // 3_600_000 for b in out["batches"] for p in b["panes"]})
    assert lengths == [23, 24, 25]


def test_replay_with_per_partition_watermarks(capsys, tmp_path):
    """Partition 1 lags 30 s: its record stays on time; once it is silent for the idle
    timeout, W follows partition 0 alone. With the global watermark the same record is late."""
    import json

    path = ROOT / "examples" / "scenarios" / "per_partition.json"
    assert main(["replay", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [b["watermark_ms"] for b in out["batches"]] == [4_000, 7_000, 7_000, 7_000, 46_000]
    assert not any(b["late"] for b in out["batches"])
    # batch 4 (at now + 4 s) finds partition 1 silent for 3 s (its last batch was batch 1):
    # idle, and W follows partition 0 alone
    assert sorted((p["key"], p["count"]) for p in out["batches"][4]["panes"]) == [("a", 2), ("b", 2)]
    scenario = json.loads(path.read_text())
    (tmp_path / "global.json").write_text(json.dumps({**scenario, "watermark": {"mode": "global"}}))
    assert main(["replay", str(tmp_path / "global.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["value"] for b in out["batches"] for r in b["late"]] == [3]
