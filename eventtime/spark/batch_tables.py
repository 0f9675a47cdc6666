"""One batch of ``window_aggregate``'s output as the sinks' tables: the panes, the late and
invalid records (key and payload as JSON) and the per-partition statistics, split by ``kind``
in the tasks (Collect.java) or from ``toArrow``; the delay histogram rows; the batch's
:class:`~eventtime.ops.monitor.BatchStats`."""

from __future__ import annotations

import json
from typing import Optional

from ..core.config import EngineConfig
from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE, PARTITION_STATS, RECORD_KINDS
from ..ops.json_text import keys_json_array, rows_json_array
from ..ops.monitor import BatchStats, PartitionStats
from .aggregate import C_REC, MERGED_FROM

__all__ = ["OPERATOR", "shapes", "collector", "sink_tables", "split", "collect", "delay_table", "BatchCounter", "timestamp_ms",
           "stats_schema", "key_schema"]

OPERATOR = "et__out"  # window_aggregate's operator struct (aggregate.py)


def key_schema(schema, keys: list):
    """The Arrow types of the key columns of ``schema`` (a Spark ``StructType``), as the sinks'
    tables store them (timestamps in UTC)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(T.StructType([schema[k] for k in keys]), error_on_duplicated_field_names_in_struct=True,
                           timezone="UTC")


def no_rows(schema):
    """The operator output of no row, as the tasks see it in Arrow (``schema``: its Spark ``StructType``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC").empty_table()


def stats_schema():
    """The partition statistics rows of a batch with none."""
    import pyarrow as pa

    return pa.schema([("partition", pa.string()), ("stat_max_event_time", pa.int64()), ("stat_rows", pa.int64()),
                      ("stat_delays", pa.string()), ("watermark", pa.timestamp("us", tz="UTC"))])


def shapes(keys: list, agg_names: list, merging: bool, record: str = C_REC) -> list[dict]:
    """The three tables a batch is split into, by ``kind``, as columns of the operator output: the
    panes (with their watermark, which the pane sink does not get), the late and invalid records
    (with the user's row, ``record``, for the payload) and the per-partition statistics. Times
    are epoch ms in the operator's struct and timestamps in the output; ``merged_from`` holds
    session bounds."""
    def col(name: str, conversion: str = "") -> dict:
        return {"name": name, "field": name, **({"as": conversion} if conversion else {})}

    panes = [*map(col, keys), col("window_start", "timestamp"), col("window_end", "timestamp"), col("pane_timing"),
             col("pane_index"), col("is_final"), *map(col, agg_names)]
    if merging:
        panes.append(col(MERGED_FROM, "bounds"))
    panes.append(col("watermark", "timestamp"))
    records = [col("kind"), col("reason"), *map(col, keys), col("event_time", "timestamp"), col("raw_timestamp"),
               col("watermark", "timestamp"), col("lateness_ms"), col("window_start", "timestamp"),
               col("window_end", "timestamp"), col("partition"), col("offset"), col(record)]
    stats = [col("partition"), col("stat_max_event_time"), col("stat_rows"), col("stat_delays"),
             col("watermark", "timestamp")]
    return [{"kinds": [PANE], "columns": panes}, {"kinds": list(RECORD_KINDS), "columns": records},
            {"kinds": [PARTITION_STATS], "columns": stats}]


def collector(spark, output_type: str, keys: list, agg_names: list, merging: bool) -> tuple:
    """The pipeline's shapes as Collect.java parsed them (once, with the class looked up once: a
    lookup is a py4j round trip per package and a search of the classpath, about 0.5 ms, and the
    parse 0.46-0.90 ms, that every batch would pay), whether Arrow's large types are on, and
    the Arrow types toArrow would give each table."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    shapes_json = json.dumps(shapes(keys, agg_names, merging))
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    pipeline = spark._jvm.eventtime.jvm.output.Collect.parse(output_type, shapes_json)
    schemas = json.loads(pipeline.schemas())
    arrow = [to_arrow_schema(T.StructType.fromJson(s), error_on_duplicated_field_names_in_struct=True, timezone="UTC",
                             prefers_large_types=large) for s in schemas]
    return pipeline, large, arrow


def sink_tables(keys: list, panes, records, stats) -> tuple:
    """The sinks' tables from the three shapes' columns (shapes), and the panes' largest
    watermark (ms, or None): the panes without their watermark, the records with their key and
    payload as JSON."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pane_watermark = panes.column("watermark")
    pane_watermark_ms = pc.max(timestamp_ms(pane_watermark)).as_py() if len(pane_watermark) else None
    panes = panes.drop_columns(["watermark"])
    keys_text = keys_json_array(keys, [records.column(k).combine_chunks() for k in keys]) \
        if keys else pa.array(["{}"] * records.num_rows, pa.string())
    columns = {
        "kind": records.column("kind"),
        "reason": records.column("reason"),
        "key": keys_text,
    }
    for k in keys:
        if k not in columns:
            columns[k] = records.column(k)
    for name in ("event_time", "raw_timestamp", "watermark", "lateness_ms", "window_start", "window_end", "partition", "offset"):
        columns[name] = records.column(name)
    # The whole original row as exact JSON (eventtime.ops.json_text), rendered here for the few
    # late / invalid records only.
    columns["payload"] = rows_json_array(records.column(C_REC).combine_chunks()) \
        if C_REC in records.column_names else records.column("payload")
    return panes, pa.table(columns), stats, pane_watermark_ms


def split(table, keys: list, agg_names: list) -> tuple:
    """(panes, records, stats rows, the panes' largest watermark ms) of one batch's operator
    output, a table of all its columns (what ``toArrow`` gives of the output of ``window_aggregate``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = table.column("kind")
    layout = shapes(keys, agg_names, MERGED_FROM in table.column_names, C_REC if C_REC in table.column_names else "payload")
    # select the few columns each output needs first, then filter only those
    tables = [table.select([c["name"] for c in shape["columns"]]).filter(
        pc.equal(kind, shape["kinds"][0]) if len(shape["kinds"]) == 1 else pc.is_in(kind, pa.array(shape["kinds"])))
        for shape in layout]
    return sink_tables(keys, *tables)


def collect(df, collected: tuple, keys: list) -> tuple:
    """As :func:`split`, split by kind in the tasks (Collect.java): each task sends each table's
    columns only, as Arrow. ``collected`` is :func:`collector`'s."""
    import pyarrow as pa
    from pyspark.serializers import NoOpSerializer
    from pyspark.util import _load_from_socket

    pipeline, large, arrow_schemas = collected
    info = pipeline.serve(df._jdf, large)
    with _load_from_socket(info, NoOpSerializer()) as stream:
        frames = list(stream)
    n = len(arrow_schemas)
    tables = []
    for s, schema in enumerate(arrow_schemas):
        parts = [pa.ipc.open_stream(frame).read_all() for frame in frames[s::n]]
        # toArrow's types (PySpark's own mapping of the Spark types), as the generic path has them
        tables.append(pa.concat_tables(parts).cast(schema) if parts else schema.empty_table())
    return sink_tables(keys, *tables)


def delay_table(stats_rows, config: EngineConfig):
    """One row per (source partition, delay bin) of the batch (eventtime/query/advise.py)."""
    import pyarrow as pa

    rows: dict = {}
    for p, text in zip(stats_rows.column("partition").to_pylist(), stats_rows.column("stat_delays").to_pylist()):
        for bin_, count in (json.loads(text) if text else {}).items():
            key = (p, int(bin_))
            rows[key] = rows.get(key, 0) + int(count)
    parts = sorted(rows, key=lambda k: ("" if k[0] is None else str(k[0]), k[1]))
    return pa.table({
        "partition": pa.array([p for p, _ in parts], pa.string()),
        "delay_bin": pa.array([b for _, b in parts], pa.int32()),
        "records": pa.array([rows[k] for k in parts], pa.int64()),
        "max_out_of_orderness_ms": pa.array([config.max_out_of_orderness_ms] * len(parts), pa.int64()),
        "allowed_lateness_ms": pa.array([config.allowed_lateness_ms] * len(parts), pa.int64()),
    })


class BatchCounter:
    """The batches' :class:`BatchStats`, with what carries over from one to the next: the
    largest watermark seen, and whether any valid event time was seen (before that, Spark's
    watermark of 0 means "no watermark yet")."""

    def __init__(self, partitioned: bool) -> None:
        self.partitioned = partitioned
        self.watermark_ms: Optional[int] = None
        self.seen_event_time = False

    def count(self, batch_id: int, panes, records, stats, pane_watermark_ms: Optional[int]) -> BatchStats:
        import pyarrow.compute as pc

        watermark_ms = None
        for table in (panes, records, stats):
            if table.num_rows and "watermark" in table.column_names:
                ms = pc.max(timestamp_ms(table.column("watermark"))).as_py()
                if ms is not None:
                    watermark_ms = ms if watermark_ms is None else max(watermark_ms, ms)
        kinds = records.column("kind").to_pylist()
        return self.tally(batch_id, stats, panes.num_rows, kinds.count(LATE_RECORD), kinds.count(INVALID_RECORD),
                          watermark_ms, pane_watermark_ms)

    def tally(self, batch_id: int, stats, panes: int, late: int, invalid: int, watermark_ms: Optional[int],
              pane_watermark_ms: Optional[int], records_by_reason: Optional[dict] = None) -> BatchStats:
        """The batch's :class:`BatchStats` from its partition statistics rows and its counts
        (``watermark_ms``: the largest watermark of its rows; ``pane_watermark_ms``: of its panes)."""
        parts: dict[str, list] = {}
        for p, t, n in zip(*[stats.column(c).to_pylist() for c in ("partition", "stat_max_event_time", "stat_rows")]):
            name = "null" if p is None else str(p)
            entry = parts.setdefault(name, [None, 0])
            if t is not None:
                entry[0] = t if entry[0] is None else max(entry[0], t)
                self.seen_event_time = True
            entry[1] += int(n)
        if watermark_ms is not None:
            self.watermark_ms = watermark_ms if self.watermark_ms is None else max(self.watermark_ms, watermark_ms)
        if pane_watermark_ms is not None:  # the panes' watermark (END_OF_INPUT_MS at the end)
            self.watermark_ms = pane_watermark_ms if self.watermark_ms is None else max(self.watermark_ms, pane_watermark_ms)
        partitions = {name: PartitionStats(max_event_time_ms=t, rows=n) for name, (t, n) in parts.items()} \
            if self.partitioned else {}
        return BatchStats(
            batch_id=int(batch_id),
            rows_in=sum(n for _, n in parts.values()),
            panes=panes,
            late=late,
            invalid=invalid,
            watermark_ms=self.watermark_ms if self.seen_event_time else None,
            partitions=partitions,
            records_by_reason=records_by_reason or {},
        )


def timestamp_ms(column):
    """An Arrow timestamp column as int64 epoch milliseconds (floored)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    unit = column.type.unit if pa.types.is_timestamp(column.type) else "ms"
    per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    ints = pc.cast(column, pa.int64())
    if per_ms is None:
        return pc.multiply(ints, 1000)
    if per_ms == 1:
        return ints
    # floor division (arrow's integer divide truncates towards zero)
    q = pc.divide(ints, per_ms)
    return pc.if_else(pc.greater(pc.multiply(q, per_ms), ints), pc.subtract(q, 1), q)
