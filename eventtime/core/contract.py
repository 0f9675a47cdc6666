"""The contract between Python and the JVM engine (row kinds, the late reason, pane timings,
modes, the operator input's row classes, the end-of-input watermark, the operator's output columns), read from ``eventtime/contract.json``: the one place it is
written. The engine's build generates ``Contract.java`` from the same file
(``eventtime/spark/engine/__init__.py``), and ``tests/spark/test_contract.py`` holds the two to it.

>>> STRINGS["PANE"], LONGS["END_OF_INPUT_MS"]
('pane', 253402300799999)
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CONTRACT_PATH", "PLAN_SCHEMA_PATH", "STRINGS", "INTS", "LONGS", "COLUMNS"]

CONTRACT_PATH = Path(__file__).resolve().parent.parent / "contract.json"
#: The JSON Schema of the operator's plan document, version ``INTS["PLAN_VERSION"]``.
PLAN_SCHEMA_PATH = CONTRACT_PATH.parent / "plan.schema.json"
_CONTRACT = json.loads(CONTRACT_PATH.read_text(encoding="utf-8"))
STRINGS: dict[str, str] = dict(_CONTRACT["strings"])
INTS: dict[str, int] = dict(_CONTRACT["ints"])
LONGS: dict[str, int] = dict(_CONTRACT["longs"])
#: The operator's output columns besides the keys and aggregations, in order: name -> Spark SQL type.
COLUMNS: dict[str, str] = dict(_CONTRACT["columns"])
