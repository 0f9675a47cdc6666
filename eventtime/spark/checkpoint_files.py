"""What the driver reads from a streaming query's checkpoint (at its local path,
:func:`eventtime.ops.paths.local_path`): the query id in ``metadata``, and a batch's line of the offset log (``batchWatermarkMs``,
``batchTimestampMs``), which Spark writes before it runs the batch."""

from __future__ import annotations

import json
import os
from typing import Optional

from ..ops.paths import local_path

__all__ = ["checkpoint_query_id", "batch_offsets"]


def checkpoint_query_id(checkpoint: str) -> Optional[str]:
    """The query id in the checkpoint's ``metadata`` (written before the first batch; it is also
    ``StreamingQuery.id``), or None while there is none."""
    try:
        with open(os.path.join(local_path(checkpoint) or checkpoint, "metadata"), encoding="utf-8") as handle:
            return json.load(handle)["id"]
    except (OSError, ValueError, KeyError):
        return None


def batch_offsets(checkpoint_dir: str, batch_id: int) -> dict:
    """The batch's metadata line of the offset log: ``batchWatermarkMs``, ``batchTimestampMs``
    and the conf. Raises ``OSError`` / ``ValueError`` when it cannot be read."""
    with open(os.path.join(checkpoint_dir, "offsets", str(batch_id)), encoding="utf-8") as handle:
        handle.readline()  # version
        return json.loads(handle.readline())
