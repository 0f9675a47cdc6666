"""The lookup service of the enrichment tests (enrich_service.py, beside them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from enrich_service import LookupService  # noqa: E402


@pytest.fixture(scope="module")
def service():
    """One service per test module, reset (counters, faults, latency 0) for each use."""
    with LookupService() as svc:
        yield svc
