"""The demo's last step: the too-late records reconciled into the results table
(``eventtime late reconcile``), and the streaming results held to the batch truth -- the same
transforms run as one bounded batch over the same input -- before and after."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

__all__ = ["compare_with_truth", "reconcile_step"]

TRUTH = "truth"  # DIR/truth: the bounded run of the streaming query's own window


def compare_with_truth(results: Any, truth: Any, keys: Sequence[str], values: Sequence[str]) -> dict:
    """Latest panes of the results against the truth's, per key and window: how many windows,
    how many differ (a value, or a window only one side has), and the summed ``values`` of each.
    Float sums are equal within 1e-9 relative (their order of addition differs)."""
    import numpy as np
    import pandas as pd

    group = [*keys, "window_start", "window_end"]
    merged = results[group + list(values)].merge(truth[group + list(values)], on=group, how="outer",
                                                  suffixes=("", "_truth"), indicator=True)

    differ = np.zeros(len(merged), dtype=bool)
    for v in values:  # NaN (a window one side lacks, or a null value) is different from everything
        a, b = (pd.to_numeric(merged[c], errors="coerce").to_numpy(dtype=float) for c in (v, f"{v}_truth"))
        close = np.abs(a - b) <= np.maximum(1e-9 * np.maximum(np.abs(a), np.abs(b)), 1e-9)  # math.isclose
        differ |= ~close
    return {"windows": len(merged), "different": int(differ.sum()),
            "totals": {v: float(results[v].sum()) for v in values},
            "truth": {v: float(truth[v].sum()) for v in values}}


def reconcile_step(output: str, keys: Sequence[str], values: Sequence[str], pipeline: str,
                   truth_job: Callable[[], Any], say: Callable[[str], None]) -> dict:
    """Run the bounded truth job (once: ``DIR/truth``), compare, reconcile, compare again (the
    windows by every one of ``values``, the totals of the first two). Returns ``{"before": ..., "after": ...}`` (:func:`compare_with_truth`)."""
    from ..query.reconcile import reconcile
    from ..sinks import latest_panes
    from .late_reconcile import describe

    results = os.path.join(output, "results")
    truth_results = os.path.join(output, TRUTH, "results")
    say("\nreconcile: the too-late records merged into the results, held to the batch truth")
    if not os.path.exists(os.path.join(truth_results, "_delta_log")):
        truth_job()
    truth = latest_panes(truth_results)
    before = compare_with_truth(latest_panes(results, pipeline=pipeline, corrections=False), truth, keys, values)
    say(f"  eventtime late reconcile --late {os.path.join(output, 'late')} --results {results} --pipeline {pipeline}")
    for line in describe(reconcile(os.path.join(output, "late"), results, pipeline=pipeline), results):
        say("  " + line)
    after = compare_with_truth(latest_panes(results, pipeline=pipeline), truth, keys, values)
    for name, report in (("before", before), ("after", after)):
        totals = ", ".join(f"{v} {report['totals'][v]:,.2f} (truth {report['truth'][v]:,.2f})" for v in values[:2])
        say(f"  {name} reconcile: {report['different']} of {report['windows']} windows differ from the batch "
            f"truth; {totals}")
    return {"before": before, "after": after}

