"""enrich_async in Spark's Python workers, against the lookup service on 127.0.0.1: a batch
DataFrame (cap, rate, retries, order, reference), completion order, and a streaming query
through with_event_time, window_aggregate and route (both failure modes, counts, alerts)."""

from __future__ import annotations

import json
import sys

import enrich_service
import pytest
from enrich_service import HttpLookup, max_in_window, value_of
from pyspark import cloudpickle
from pyspark.sql import functions as F

import eventtime
from streams import drain, write_json_lines
from eventtime.enrich.spark import QueryEnrichment

pytestmark = pytest.mark.spark

# The workers cannot import the tests' helpers: the lookup class travels by value.
cloudpickle.register_pickle_by_value(enrich_service)
PROFILE = "struct<name:string,score:int>"


def profile(key):
    return None if key is None else value_of(key)


@pytest.mark.slow
def test_batch_equals_the_reference_within_cap_and_rate_and_keeps_input_order(spark, service):
    service.reset(latency_ms=150, fail_first={"u7": 1}, always_fail={"u13"})
    rows = [(i, f"u{i % 40}" if i % 17 else None) for i in range(300)]
    df = spark.createDataFrame(rows, "id long, user string")  # 2 partitions, in order
    assert df.rdd.getNumPartitions() == 2
    out = df.transform(eventtime.enrich_async(
        HttpLookup(service.url), key="user", output="profile", value_type=PROFILE, chunk_size=2, max_in_flight=2,
        rate_limit=10, retries=2, backoff="10 ms", seed=3))
    counts = QueryEnrichment(out)
    got = out.collect()

    assert [r.id for r in got] == list(range(300))  # nothing lost, input order kept
    # a 5xx fails its request's whole chunk: u13 and the key sharing its chunk (in each worker)
    failed = {r.user for r in got if r.profile_error is not None}
    assert "u13" in failed and len(failed) <= 3
    for r, (_, user) in zip(got, rows):
        assert r.user == user
        if r.profile_error is not None or user == "u13":
            assert (r.profile, r.profile_error) == (None, "lookup_error: ClientResponseError")
        else:
            assert (r.profile and r.profile.asDict(), r.profile_error) == (profile(user), None)
    assert all(type(r.profile.score) is int for r in got if r.profile is not None)  # ints stay ints

    workers = [w for w in service.times if w != "-"]
    assert len(workers) == 2  # two Python workers, each with its own loop, cap and limiter
    for worker in workers:
        assert service.worker_max_in_flight[worker] == 2  # reached (150 ms calls every 100 ms), never passed
        assert max_in_window(service.times[worker], 1.0) <= 10 + 1
    assert service.max_in_flight <= 2 * 2
    assert service.attempts["u13"] == 2 * 3  # each worker: 1 + 2 retries, then routed
    (step,) = counts.take().values()
    n_failed = sum(1 for r in got if r.profile_error is not None)
    assert (step["rows"], step["failed"], step["lookup_error"], step["null_keys"]) == (300, n_failed, n_failed, 18)
    assert step["requests"] == service.requests and step["retries"] == 1 + 2 * 2


def test_unordered_emits_in_completion_order_and_converts_types(spark, service):
    service.reset(latency_ms=5, key_latency_ms={"slow": 400})
    users = ["slow" if i % 10 == 0 else f"u{i % 7}" for i in range(60)]
    df = spark.createDataFrame(list(enumerate(users)), "id long, user string").coalesce(1)

    async def score(keys):  # an in-memory lookup beside the HTTP one: a bigint, and one bad value
        return [("oops" if k == "u3" else value_of(k)["score"]) for k in keys]

    out = (df.transform(eventtime.enrich_async(HttpLookup(service.url), key="user", output="profile",
                                               value_type=PROFILE, chunk_size=1, ordered=False))
             .transform(eventtime.enrich_async(score, key="user", output="score", value_type="bigint", ordered=False)))
    got = out.collect()
    assert sorted(r.id for r in got) == list(range(60))
    slow = [i for i, r in enumerate(got) if r.user == "slow"]
    assert slow == list(range(60 - 6, 60))  # the slow key's rows left last
    for r in got:
        assert r.profile.asDict() == value_of(r.user) and r.profile_error is None
        if r.user == "u3":
            assert (r.score, r.score_error) == (None, "bad_value: ArrowInvalid")
        else:
            assert r.score == value_of(r.user)["score"] and type(r.score) is int




class _Alerts(eventtime.Alerter):
    def __init__(self):
        super().__init__(dsn=None, pipeline="shop")
        self.batches = []

    def on_batch(self, batch_id, records, stats):
        result = super().on_batch(batch_id, records, stats)
        self.batches.append((stats, result))
        return result


@pytest.mark.slow
def test_stream_routes_failures_null_or_invalid_and_counts_them(spark, service, tmp_path):
    service.reset(latency_ms=5, slow_ms=3000, always_fail={"ghost"}, always_slow={"stuck"}, fail_first={"u1": 1})
    base = 1_700_000_040_000 - 1_700_000_040_000 % 60_000
    rows = [{"id": i, "user": ["u0", "u1", "u2", "ghost"][i % 4], "sku": "stuck" if i % 5 == 0 else f"s{i % 3}",
             "ts": base + i * 1000} for i in range(40)]
    src = tmp_path / "src"
    src.mkdir()
    events = (
        spark.readStream.schema("id long, user string, sku string, ts long").option("maxFilesPerTrigger", 1).json(str(src))
        .transform(eventtime.enrich_async(HttpLookup(service.url), key="user", output="profile", value_type=PROFILE,
                                          chunk_size=1, retries=1, backoff=0))
        .transform(eventtime.enrich_async(HttpLookup(service.url), key="sku", output="price", value_type=PROFILE,
                                          chunk_size=1, timeout="300 ms", retries=1, backoff=0, on_failure="invalid"))
        .withColumn("score", F.col("profile.score"))
        .transform(eventtime.with_event_time("ts", unit="ms", now=base))
    )
    out = events.transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"),
                                                      aggregations=[eventtime.count(), eventtime.sum("score")]))
    panes, records, alerts = [], [], _Alerts()
    router = eventtime.route(out, panes=lambda t, b, q: panes.extend(t.to_pylist()),
                             late=lambda t, b, q: records.extend(t.to_pylist()), alerter=alerts, pipeline="shop")
    query = router.start(checkpoint=str(tmp_path / "chk"))
    try:
        write_json_lines(str(src), "0.json", rows)
        drain(query, 0)
        write_json_lines(str(src), "1.json", [{"id": 99, "user": "u0", "sku": "s0", "ts": base + 5 * 60_000}])  # moves W
        drain(query, 1)
        progress = query.recentProgress
    finally:
        query.stop()

    stuck = [r for r in rows if r["sku"] == "stuck"]
    invalid = [r for r in records if r["kind"] == "invalid"]
    assert sorted(json.loads(r["payload"])["id"] for r in invalid) == [r["id"] for r in stuck]
    assert {r["reason"] for r in invalid} == {"enrichment_failed"}
    assert {json.loads(r["payload"])["price_error"] for r in invalid} == {"timeout"}
    # the rest reached the windows: counts and the enriched scores equal the reference
    first = [p for p in panes if p["window_start"].timestamp() * 1000 == base]
    valid = [r for r in rows if r["sku"] != "stuck"]
    assert sorted((p["user"], p["count"], p["sum_score"]) for p in first) == sorted(
        (u, sum(1 for r in valid if r["user"] == u),
         None if u == "ghost" else sum(value_of(u)["score"] for r in valid if r["user"] == u))
        for u in {r["user"] for r in valid})
    assert sum(p["count"] for p in first) + len(invalid) == len(rows)  # nothing lost

    stats, result = alerts.batches[0]
    ghosts = sum(1 for r in rows if r["user"] == "ghost")
    assert stats.rows_in == len(rows) and stats.invalid == len(stuck)
    assert stats.enrichment["profile"]["failed"] == stats.enrichment["profile"]["lookup_error"] == ghosts
    assert stats.enrichment["profile"]["retries"] == 2  # the ghost chunk and u1's first failure
    assert stats.enrichment["price"]["timeout"] == len(stuck) and stats.enrichment["price"]["on_failure"] == "invalid"
    assert sorted((a.kind, a.reason, a.count) for a in result.alerts) == [
        ("enrichment_failed", "profile", ghosts), ("invalid", "enrichment_failed", len(stuck))]
    observed = [p["observedMetrics"] for p in progress if "eventtime_enrich_profile" in p.get("observedMetrics", {})]
    metric = observed[0]["eventtime_enrich_profile"]
    metric = metric.asDict() if hasattr(metric, "asDict") else metric
    assert (metric["rows"], metric["failed"], metric["lookup_error"]) == (len(rows), ghosts, ghosts)


def test_mistakes_are_refused_when_the_step_is_applied(spark):
    async def lookup(keys):
        return keys

    df = spark.createDataFrame([], "user string, ts long, tags array<string>, profile string")
    step = eventtime.enrich_async(lookup, key="nope", output="p")
    with pytest.raises(ValueError, match=r"key column 'nope' not found; columns: \['user', 'ts', 'tags', 'profile'\]"):
        df.transform(step)
    with pytest.raises(ValueError, match="output column 'profile' already exists"):
        df.transform(eventtime.enrich_async(lookup, key="user", output="profile"))
    with pytest.raises(TypeError, match=r"key column 'tags' must be of an atomic type.*array<string>"):
        df.transform(eventtime.enrich_async(lookup, key="tags", output="p"))
    with pytest.raises(ValueError, match=r"value_type must be a Spark DDL type.*'strang'"):
        df.transform(eventtime.enrich_async(lookup, key="user", output="p", value_type="strang"))
    timed = df.transform(eventtime.with_event_time("ts", unit="ms"))
    for mode in ("invalid", "null"):
        with pytest.raises(ValueError, match="enrich_async must be applied BEFORE with_event_time"):
            timed.transform(eventtime.enrich_async(lookup, key="user", output="p", on_failure=mode))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
