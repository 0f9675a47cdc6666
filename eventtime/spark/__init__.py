"""The Spark engine: ``with_event_time`` -> ``window_aggregate`` -> ``route``.

>>> import eventtime
>>> events = raw.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds"))  # doctest: +SKIP
>>> out = events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 day"),
...                                                   allowed_lateness="10 minutes"))  # doctest: +SKIP
>>> query = eventtime.route(out, panes=write_results, late=write_late).start(checkpoint="/chk")  # doctest: +SKIP

Plan of one query (``eventtime.spark.aggregate`` and ``.router``; the operator is Java, ``eventtime/spark/engine/src``)::

    source (+ end-of-input control stream) -> with_event_time (Spark SQL: parse + classify,
           __et_wm timestamp, withWatermark)
           -> operator input (the user's row as one struct, event time as a plain long, row
              class data / heartbeat / invalid / control, reason, partition text, offset)
           -> Mapper (mapPartitions): per-partition statistics; map-side combine per (key,
              slice) of the rows live under the batch's watermark (published by the driver)
           -> groupBy(kind, hash bucket).transformWithState(WindowOperator, EventTime):
              state per user key in the bucket's map state (RocksDB), one timer per bucket
           -> observe(counts, watermark) -> foreachBatch(Router): split by kind into sinks,
              payload JSON of late / invalid records rendered on the driver

Facts measured on pyspark 4.3.0 that the design rests on:

* ``TimeMode.EventTime`` drops rows behind the watermark before the operator only when the
  operator input carries the watermark metadata; with the event time passed as a plain long
  every row reaches the operator, and event-time timers still fire on the query watermark.
* Rows whose watermark column is null pass ``withWatermark`` untouched and do not take part
  in the batch's max event time: invalid records cannot move the watermark.
* ``getCurrentWatermarkInMs()`` is the watermark computed from the previous batches (the
  offset log's ``batchWatermarkMs``); timers due at it fire after the batch's rows. When data
  comes every batch Spark runs no no-data batch, hence the operator's catch-up sweep.
* A local property set in ``foreachBatch`` before the batch's action reaches its tasks, and
  Spark's own ``sql.streaming.queryId`` / ``streaming.sql.batchId`` properties are there too:
  the map-side combine checks both before trusting the published watermark.
* Per-key event-time timers cost four RocksDB writes per move; when every key's next window
  fires every batch they took ~60 % of the operator's time (1M rows, 10k keys), hence one
  timer per hash bucket and per-key state in the bucket's map state.
* A static DataFrame runs ``transformWithState`` as one batch without a watermark
  (``TimeMode.EventTime`` fails there): it runs with ``TimeMode.None`` and each bucket is
  swept to the end of input after its rows.
* The streaming query id is ``StreamingQuery.id`` and the ``id`` of ``<checkpoint>/metadata``,
  which exists before the first ``foreachBatch`` call.
"""

from __future__ import annotations

from .aggregate import window_aggregate
from .connect import ClassicSessionRequiredError
from .errors import QueryFailedError, describe_failure
from .extract import with_event_time
from .engine import engine_jar
from .router import Router, route
from .session import local_session

__all__ = ["with_event_time", "window_aggregate", "route", "Router", "local_session", "engine_jar", "describe_failure", "QueryFailedError",
           "ClassicSessionRequiredError"]
