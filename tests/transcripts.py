"""Loading of the transcript scenarios shared by the reference and Spark engine tests."""

from __future__ import annotations

import json
from pathlib import Path

TRANSCRIPT_DIR = Path(__file__).parent / "transcripts"


def transcript_paths() -> list[Path]:
    paths = sorted(TRANSCRIPT_DIR.glob("*.json"))
    assert paths, f"no transcript scenarios found in {TRANSCRIPT_DIR}"
    return paths


def lists_merged_from(expected: dict) -> bool:
    """Whether a transcript's expected panes carry ``merged_from`` (session transcripts do)."""
    return any("merged_from" in pane for batch in expected["batches"] for pane in batch["panes"])


def load_transcript(path: Path) -> tuple[dict, dict]:
    data = json.loads(path.read_text())
    assert set(data) <= {"description", "scenario", "expected"}, f"{path.name}: unknown fields {set(data)}"
    return data["scenario"], data["expected"]
