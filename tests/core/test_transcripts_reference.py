"""Every transcript scenario, run through the reference model, gives its expected output."""

import pytest
from transcripts import lists_merged_from, load_transcript, transcript_paths

from eventtime.harness.scenario import diff_outputs, parse_scenario, run_reference


@pytest.mark.parametrize("path", transcript_paths(), ids=lambda p: p.stem)
def test_reference_matches_transcript(path):
    scenario, expected = load_transcript(path)
    actual = run_reference(parse_scenario(scenario), merged_from=lists_merged_from(expected))
    difference = diff_outputs(expected, actual)
    assert difference is None, f"{path.name}: {difference}"
