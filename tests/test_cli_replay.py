"""The `eventtime replay` command: the fixed JSON contract and clear errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import load_transcript, transcript_paths

from eventtime.cli import main
from eventtime.scenario import diff_outputs

ROOT = Path(__file__).resolve().parents[1]


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
