"""The transcript harness can fail: a wrong expected output is reported as a mismatch.

Every transcript's expected output is altered in each way an engine could be wrong (a value,
a missing or extra pane, a pane's timing or index, a late record, the watermark, a batch) and
compared, with the harness's own ``diff_outputs``, against what the reference model really
produces. Each alteration must be reported, naming the batch and the part that differs. An
engine that output nothing could not pass a transcript either: every transcript expects
records somewhere.
"""

import copy

import pytest
from transcripts import lists_merged_from, load_transcript, transcript_paths

from eventtime.harness.scenario import diff_outputs, parse_scenario, run_reference

NUMERIC_FIELDS = ("count", "sum", "mean", "min", "max", "first", "last")


def _first(expected: dict, part: str):
    """(batch index, row index) of the first row of ``part`` in any batch, or None."""
    for b, batch in enumerate(expected["batches"]):
        if batch[part]:
            return b, 0
    return None


def _mutations(expected: dict):
    """(name, batch index or None, part or None, altered copy) for each applicable alteration."""
    out = []

    def altered(change, b, part, name):
        e = copy.deepcopy(expected)
        change(e)
        out.append((name, b, part, e))

    found = _first(expected, "panes")
    if found:
        b, r = found
        pane = expected["batches"][b]["panes"][r]
        field = next((f for f in pane if f in NUMERIC_FIELDS and isinstance(pane[f], (int, float)) and not isinstance(pane[f], bool)), None)
        if field:
            altered(lambda e: e["batches"][b]["panes"][r].__setitem__(field, pane[field] + 1), b, "panes", f"pane {field} + 1")
        altered(lambda e: e["batches"][b]["panes"].pop(r), b, "panes", "pane missing")
        altered(lambda e: e["batches"][b]["panes"].append(copy.deepcopy(pane)), b, "panes", "pane twice")
        other = {"ON_TIME": "LATE", "LATE": "ON_TIME", "FINAL": "LATE"}[pane["timing"]]
        altered(lambda e: e["batches"][b]["panes"][r].__setitem__("timing", other), b, "panes", "pane timing")
        altered(lambda e: e["batches"][b]["panes"][r].__setitem__("index", pane["index"] + 1), b, "panes", "pane index")
        altered(lambda e: e["batches"][b]["panes"][r].__setitem__("window_end", pane["window_end"] + 1), b, "panes", "window end")
    for part in ("late", "invalid"):
        found = _first(expected, part)
        if found:
            b, r = found
            altered(lambda e, b=b, r=r, part=part: e["batches"][b][part].pop(r), b, part, f"{part} record missing")
    wb = next((b for b, batch in enumerate(expected["batches"]) if batch["watermark_ms"] is not None), None)
    if wb is not None:
        altered(lambda e: e["batches"][wb].__setitem__("watermark_ms", expected["batches"][wb]["watermark_ms"] + 1), wb, "watermark_ms", "watermark + 1")
    altered(lambda e: e["batches"].append({"watermark_ms": None, "panes": [], "late": [], "invalid": []}), None, None, "extra batch")
    return out


PATHS = transcript_paths()


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_every_transcript_expects_records(path):
    _, expected = load_transcript(path)
    rows = sum(len(batch[part]) for batch in expected["batches"] for part in ("panes", "late", "invalid"))
    assert rows > 0, f"{path.name} expects no output at all: an engine that outputs nothing would pass it"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_a_wrong_expected_output_is_reported(path):
    scenario, expected = load_transcript(path)
    actual = run_reference(parse_scenario(scenario), merged_from=lists_merged_from(expected))
    assert diff_outputs(expected, actual) is None  # the unaltered transcript passes
    mutations = _mutations(expected)
    assert len(mutations) >= 3, f"{path.name}: too few alterations apply"
    for name, batch, part, wrong in mutations:
        difference = diff_outputs(wrong, actual)
        assert difference is not None, f"{path.name}: '{name}' was not reported"
        if batch is not None:
            assert difference.startswith(f"batch {batch} {part}:"), f"{path.name}: '{name}' reported as {difference!r}"
        else:
            assert "batches" in difference, f"{path.name}: '{name}' reported as {difference!r}"
