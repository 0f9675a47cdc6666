"""``route``'s checks of what it is given, before the query starts: sinks callable as
``sink(table, batch_id, query_id)``, an alerter with ``on_batch(batch_id, records, stats)``, a
pipeline name, a progress setting, tables that a lost checkpoint's query wrote; the sinks
given the query's session and columns (:func:`bind_sinks`); and what the sinks' stores refused
in a batch."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

__all__ = ["check_route_arguments", "check_no_orphaned_tables", "takes_positional", "accepts_keyword", "bind_sinks",
           "rejected_rows"]

log = logging.getLogger("eventtime.spark")


def takes_positional(function: Callable, count: int) -> bool:
    """Whether ``function`` can be called with ``count`` positional arguments (True when its
    signature cannot be read, e.g. some builtins).

    >>> takes_positional(lambda table, batch_id, query_id: None, 3), takes_positional(print, 3)
    (True, True)
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def accepts_keyword(function: Callable, name: str) -> bool:
    """Whether ``function`` takes the keyword argument ``name`` (or any, ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _signature_text(function: Callable) -> str:
    try:
        return f"the arguments {inspect.signature(function)}"
    except (TypeError, ValueError):  # pragma: no cover - only called when the signature was read
        return "other arguments"


def check_route_arguments(sinks: dict, alerter: Any, pipeline: Any, progress: Any) -> None:
    """Refuse, naming the parameter, what would fail only inside the running query: ``sinks``
    is ``{parameter: sink or None}``."""
    if not isinstance(progress, bool) and not callable(progress):
        raise TypeError(f"route: progress must be True, False or a callable(line), got {type(progress).__name__} "
                        f"{progress!r}")
    for parameter, sink in sinks.items():
        if sink is not None and not callable(sink):
            raise TypeError(
                f"route: {parameter} must be a sink, a callable (table, batch_id, query_id) such as "
                f"eventtime.sinks.DeltaResultsSink(path), got {type(sink).__name__} {sink!r}"
            )
        if isinstance(sink, type):
            raise TypeError(
                f"route: {parameter} must be a sink object, got the class {sink.__name__}; make one first, "
                f"e.g. {parameter}={sink.__name__}(path, pipeline=...)"
            )
        if sink is not None and not takes_positional(sink, 3):
            raise TypeError(
                f"route: {parameter} must be callable as {parameter}(table, batch_id, query_id), but "
                f"{sink!r} takes {_signature_text(sink)}"
            )
    if all(sinks.get(p) is None for p in ("panes", "late", "invalid")):
        raise ValueError(
            "route: no sink given (panes, late and invalid are all None): every pane and record would be "
            "discarded. Give at least one, e.g. panes=DeltaResultsSink(path), late=DeltaLateSink(path)"
        )
    if alerter is not None and (isinstance(alerter, type) or not callable(getattr(alerter, "on_batch", None))):
        raise TypeError(
            "route: alerter must have on_batch(batch_id, records, stats): an object such as "
            f"eventtime.Alerter(pipeline=...), got {alerter!r}"
        )
    if alerter is not None and not takes_positional(alerter.on_batch, 3):
        raise TypeError(
            f"route: alerter.on_batch must be callable as on_batch(batch_id, records, stats), but it takes "
            f"{_signature_text(alerter.on_batch)}"
        )
    if not isinstance(pipeline, str) or not pipeline:
        raise TypeError(f"route: pipeline must be a non-empty string, got {pipeline!r}")


def rejected_rows(results: list) -> dict:
    """``{sink target: ((row index, key, error), ...)}`` of the rows the sinks' stores refused,
    from ``[(sink, what it returned)]`` (a :class:`eventtime.sinks.WriteResult`'s ``rejected``,
    filled by a :class:`eventtime.sinks.BatchSink`; other sinks return nothing of the kind)."""
    out: dict = {}
    for sink, result in results:
        rows = getattr(result, "rejected", None)
        if rows:
            target = getattr(sink, "target", None) or type(sink).__name__
            out[target] = tuple((r.row_index, r.key, r.error) for r in rows)
    return out


def check_no_orphaned_tables(sinks: tuple, checkpoint: str, fresh_start: bool, pipeline: str) -> None:
    """A new (or deleted) checkpoint whose sinks already hold rows of the pipeline raises
    :class:`~eventtime.ops.compat.CheckpointMissingError` (the source would be read again and
    those rows written twice), unless ``fresh_start`` says a new query is intended."""
    from ..ops.compat import CheckpointMissingError

    for sink in {id(s): s for s in sinks if s is not None}.values():
        ids = sink.pipeline_query_ids() if hasattr(sink, "pipeline_query_ids") else []
        if not ids:
            continue
        where = getattr(sink, "path", repr(sink))
        if fresh_start:
            log.warning("eventtime[%s]: fresh start requested; %s already holds rows of query id(s) %s",
                        pipeline, where, ", ".join(ids))
            continue
        raise CheckpointMissingError(
            f"checkpoint {checkpoint!r} has no query metadata (new or deleted), but {where} already holds rows "
            f"of pipeline {getattr(sink, 'pipeline', pipeline)!r} written by query id(s) {', '.join(ids)}. "
            "Starting now would read the source again and write those rows twice. Restore the checkpoint, "
            "or pass fresh_start=True to start a new query over these tables on purpose."
        )


def bind_sinks(out, routed: tuple, keys: list, agg_names: list, document: dict) -> None:
    """Before the query starts, each sink that takes the query's session (``bind_route``: the
    Delta and Kafka sinks, which check their tables and topics then) gets it and the route's
    other sinks; the results sink its pane columns and their types, the others the key
    columns' types. Once every sink is accepted, the tables whose columns are known are made,
    empty, and the results and late tables record the pipeline (``document``, what ``eventtime late
    reconcile`` reads: spark/plan.py's ``pipeline_document``). ``routed``: the panes, late, invalid and delay
    sinks, each may be ``None``."""
    from .aggregate import MERGED_FROM
    from .batch_tables import key_schema, no_rows, split

    panes, late = routed[0], routed[1]
    sinks = list({id(s): s for s in routed if s is not None}.values())
    columns = [*keys, "window_start", "window_end", "pane_timing", "pane_index", "is_final", *agg_names,
               *([MERGED_FROM] if MERGED_FROM in out.columns else [])]
    for sink in sinks:
        bind = getattr(sink, "bind_route", None)
        if callable(bind):
            extra = {"columns": columns} if sink is panes and accepts_keyword(bind, "columns") else {}
            if sink is panes and accepts_keyword(bind, "pane_schema"):
                extra["pane_schema"] = split(no_rows(out.schema), keys, agg_names)[0].schema
            if sink is not panes and accepts_keyword(bind, "key_schema"):
                extra["key_schema"] = key_schema(out.schema, keys)
            bind(out.sparkSession, [other for other in sinks if other is not sink], **extra)
    for sink in sinks:  # every sink accepted: the tables whose columns are known made, empty
        getattr(sink, "ensure_table", lambda: False)()
        if sink is panes or sink is late:
            getattr(sink, "record_pipeline", lambda _document: None)(document)
