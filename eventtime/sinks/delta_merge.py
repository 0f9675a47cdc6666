"""The current-state results table (``DeltaResultsSink(..., mode="upsert")``): one row per
pipeline, key and window, updated by every pane and CORRECTION through one Delta ``MERGE`` per
batch (delta-rs; Spark SQL's ``MERGE`` when the session has Delta), exactly once per batch by
the same app transaction as an append (delta-rs: the commit's transaction; delta-spark: the
``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` session settings, which its ``MERGE``
checks). A session pane deletes the rows of the sessions it supersedes (its ``merged_from``),
and a superseded session's pane is not written, even one of the same batch."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .schema import superseded

__all__ = ["MERGE_KEYS", "merge_rows", "merge_rust", "merge_spark", "insert_rust", "insert_spark"]

#: The columns that identify a row of the current-state table.
MERGE_KEYS = ("pipeline", "key", "window_start", "window_end")
_OP = "_et_op"  # upsert / delete: what the source row does to the table's row


def merge_rows(data: pa.Table) -> pa.Table:
    """The batch's rows as a ``MERGE`` source: each window's last pane (the highest index) to
    upsert, but for the sessions a pane of the batch supersedes, whose rows are deleted."""
    order = pc.sort_indices(data, sort_keys=[(c, "ascending") for c in MERGE_KEYS] + [("pane_index", "descending")])
    data = data.take(order)
    columns = [data.column(c).to_pylist() for c in MERGE_KEYS]
    gone: set = set()
    if "merged_from" in data.column_names:
        gone = superseded(list(zip(columns[0], columns[1])), columns[2], columns[3],
                          data.column("merged_from").to_pylist())
    seen: set = set()
    keep = []
    for i, k in enumerate(zip(*columns)):
        if k not in seen and ((k[0], k[1]), k[2], k[3]) not in gone:
            keep.append(i)
        seen.add(k)
    upserts = data.take(pa.array(keep, pa.int64())).append_column(_OP, pa.array(["upsert"] * len(keep)))
    deletes = sorted((p, k, s, e) for (p, k), s, e in gone)
    if not deletes:
        return upserts
    delete_rows = {c: pa.array([d[i] for d in deletes], data.schema.field(c).type) for i, c in enumerate(MERGE_KEYS)}
    delete_rows[_OP] = pa.array(["delete"] * len(deletes))
    empty = {f.name: pa.nulls(len(deletes), f.type) for f in upserts.schema if f.name not in delete_rows}
    return pa.concat_tables([upserts, pa.table({**delete_rows, **empty}).select(upserts.column_names)])


def _on(target: str, source: str) -> str:
    return " AND ".join(f"{target}.`{c}` = {source}.`{c}`" for c in MERGE_KEYS)


def merge_rust(dt: Any, rows: pa.Table, commit_properties: Any) -> None:
    """One ``MERGE`` of ``rows`` (:func:`merge_rows`) into the delta-rs table ``dt``."""
    columns = [c for c in rows.column_names if c != _OP]
    (dt.merge(rows, _on("t", "s"), source_alias="s", target_alias="t", merge_schema=True,
              commit_properties=commit_properties)
     .when_matched_delete(predicate=f"s.{_OP} = 'delete'")
     .when_matched_update(updates={f"`{c}`": f"s.`{c}`" for c in columns}, predicate=f"s.{_OP} = 'upsert'")
     .when_not_matched_insert(updates={f"`{c}`": f"s.`{c}`" for c in columns}, predicate=f"s.{_OP} = 'upsert'")
     .execute())


def merge_spark(spark: Any, path: str, rows: pa.Table, app_id: str, version: int, on: str | None = None,
                update: bool = True, user_metadata: dict | None = None) -> None:
    """The same ``MERGE`` through Spark SQL, under the app transaction ``(app_id, version)``:
    delta-spark skips it when the table has that version. ``user_metadata``: the commit's
    ``userMetadata``, as JSON."""
    import json
    import uuid

    view = f"eventtime_merge_{uuid.uuid4().hex}"
    source = spark.createDataFrame(rows)
    source.createOrReplaceTempView(view)
    columns = [c for c in rows.column_names if c != _OP]
    quoted = path.replace("`", "``")
    # New columns first (Delta's MERGE evolves the schema only for UPDATE SET * / INSERT *, which
    # would add the operation column too): a commit of its own that a re-run finds done.
    present = set(spark.read.format("delta").load(path).columns)
    new = [f for f in source.schema.fields if f.name in columns and f.name not in present]
    if new:
        spark.sql(f"ALTER TABLE delta.`{quoted}` ADD COLUMNS ("
                  + ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in new) + ")")
    sets = ", ".join(f"t.`{c}` = s.`{c}`" for c in columns)
    names = ", ".join(f"`{c}`" for c in columns)
    values = ", ".join(f"s.`{c}`" for c in columns)
    conf = spark.conf
    try:
        conf.set("spark.databricks.delta.write.txnAppId", app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(int(version)))
        if user_metadata:
            conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps(user_metadata, sort_keys=True))
        spark.sql(
            f"MERGE INTO delta.`{quoted}` AS t USING {view} AS s ON {on or _on('t', 's')} "
            + (f"WHEN MATCHED AND s.{_OP} = 'delete' THEN DELETE "
               f"WHEN MATCHED AND s.{_OP} = 'upsert' THEN UPDATE SET {sets} " if update else "")
            + f"WHEN NOT MATCHED AND s.{_OP} = 'upsert' THEN INSERT ({names}) VALUES ({values})")
    finally:
        conf.unset("spark.databricks.delta.write.txnAppId")
        conf.unset("spark.databricks.delta.write.txnVersion")
        conf.unset("spark.databricks.delta.commitInfo.userMetadata")
        spark.catalog.dropTempView(view)


# An insert that reads the table: two concurrent commits of one batch conflict (delta-rs and
# delta-spark see the other's files in what they read) instead of both landing as blind appends
# would; the loser's retry finds the batch committed. What a reconcile run appends with.
_INSERT_ON = _on("t", "s") + " AND t.`pane_index` = s.`pane_index`"


def insert_rust(dt: Any, rows: pa.Table, commit_properties: Any) -> None:
    """Append ``rows`` (panes not yet in the table) to the delta-rs table ``dt`` by a ``MERGE``."""
    columns = rows.column_names
    (dt.merge(rows, _INSERT_ON, source_alias="s", target_alias="t", merge_schema=True,
              commit_properties=commit_properties)
     .when_not_matched_insert(updates={f"`{c}`": f"s.`{c}`" for c in columns})
     .execute())


def insert_spark(spark: Any, path: str, rows: pa.Table, app_id: str, version: int,
                 user_metadata: dict | None = None) -> None:
    """The same insert through Spark SQL's ``MERGE``, under the app transaction."""
    merge_spark(spark, path, rows.append_column(_OP, pa.array(["upsert"] * rows.num_rows)), app_id, version,
                on=_INSERT_ON, update=False, user_metadata=user_metadata)
