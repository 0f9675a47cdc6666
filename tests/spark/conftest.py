"""Paths of the Spark engine tests' helpers (the session fixture is in tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# jvm_harness.py lives beside the tests; property_tests/ (the shared strategies) at the root.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2]))
