"""The Spark engine: ``with_event_time`` -> ``window_aggregate`` -> ``route``.

>>> import eventtime
>>> events = raw.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds"))  # doctest: +SKIP
>>> out = events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 day"),
...                                                   allowed_lateness="10 minutes"))  # doctest: +SKIP
>>> query = eventtime.route(out, panes=write_results, late=write_late).start(checkpoint="/chk")  # doctest: +SKIP

Plan of one query (``eventtime.spark.transforms``)::

    source -> with_event_time (Spark SQL: parse + classify, __et_wm timestamp, withWatermark)
           -> operator input (user columns as et__u<i>, bucket = pmod(xxhash64(keys), n),
              event time as a plain long, row class data / heartbeat / invalid)
           -> mapInArrow(pack_by_bucket)          one row per (input Arrow batch, bucket)
           -> groupBy(bucket).transformWithStateInPandas(EventTimeProcessor, EventTime)
           -> observe(counts, watermark) -> foreachBatch(Router): split by kind into sinks

Facts measured on pyspark 4.3.0 that the design rests on:

* ``timeMode="EventTime"`` drops rows behind the watermark before the processor only when the
  operator input carries the watermark metadata; with the event time passed as a plain long
  every row reaches the processor, and event-time timers still fire on the query watermark.
* Rows whose watermark column is null pass ``withWatermark`` untouched and do not take part
  in the batch's max event time: invalid records cannot move the watermark.
* After a batch that moved the watermark Spark runs a no-data batch (``foreachBatch`` is
  called with an empty DataFrame); ``getCurrentWatermarkInMs()`` is the watermark computed
  from the previous batches, i.e. ``W`` during a data batch and ``W'`` in that no-data batch.
  When more data is waiting, Spark runs the next data batch instead; the processor's
  catch-up sweep keeps the semantics, panes then arrive one batch later.
* Real Spark accepts an event-time timer at or below the watermark (it fires in the same
  batch); ``TwsTester`` raises. The processor only registers timers above the watermark.
* In ``handleInputRows`` the key is a tuple, in ``handleExpiredTimer`` a ``Row``; the
  handler parameters must be named ``key, rows, timerValues`` / ``key, timerValues,
  expiredTimerInfo`` (they are passed by keyword).
* The pandas TWS worker regroups its input row by row (``itertuples`` and
  ``pd.DataFrame(list_of_rows)``, ~6 us per row with 12 columns); column names starting with
  ``_`` come out as ``_<position>``; output columns with pandas 3's Arrow-backed ``str`` dtype
  fail to convert (ChunkedArray). Hence the packing step and object columns.
* Each state call is a socket round trip (~70-150 us), so state is one pickled, columnar
  accumulator frame per (bucket, slice), not one entry per user key.
* The streaming query id is ``StreamingQuery.id`` and the ``id`` of ``<checkpoint>/metadata``,
  which exists before the first ``foreachBatch`` call.
"""

from __future__ import annotations

from .errors import QueryFailedError, describe_failure
from .extract import with_event_time
from .session import local_session
from .transforms import Router, route, window_aggregate

__all__ = ["with_event_time", "window_aggregate", "route", "Router", "local_session", "describe_failure", "QueryFailedError"]
