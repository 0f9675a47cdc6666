"""Feeding a file-source stream in tests: write a JSON-lines file atomically, run until read."""

from __future__ import annotations

import json
import os
import time


def write_json_lines(directory: str, name: str, rows) -> None:
    """``rows`` as the file ``directory/name``, appearing at once (written beside, then renamed)."""
    tmp = os.path.join(os.path.dirname(directory), name + ".tmp")
    with open(tmp, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    os.rename(tmp, os.path.join(directory, name))


def drain(query, i: int, timeout_s: float = 120) -> None:
    """Until the source has read file ``i`` and every batch it caused has run."""
    deadline = time.monotonic() + timeout_s
    while True:
        query.processAllAvailable()
        end = (query.lastProgress or {}).get("sources", [{}])[0].get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if end and int(end["logOffset"]) >= i:
            break
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"file {i} not read in {timeout_s} s"
        time.sleep(0.05)
    query.processAllAvailable()
