"""The async enrichment machinery without Spark: against the real HTTP service on 127.0.0.1
(cap, rate, retries, timeouts, dedupe, order) and against a plain dict (the reference)."""

from __future__ import annotations

import asyncio
import functools

import pytest
from enrich_service import HttpLookup, max_in_window, value_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventtime.enrich import EnrichConfig, Enricher


def run(coro):
    return asyncio.run(coro)


async def enrich_http(service, keys, **options):
    lookup = HttpLookup(service.url)
    enricher = Enricher(lookup, EnrichConfig(**options))
    try:
        return await enricher.enrich(keys), enricher
    finally:
        await lookup.aclose()


def reference(keys, table=value_of):
    """What enrichment must give: a plain synchronous lookup per row."""
    return [None if k is None else table(k) for k in keys]


def test_results_equal_the_reference_and_each_key_is_asked_once(service):
    service.reset(latency_ms=20)
    keys = [f"u{i % 150}" for i in range(600)] + [None] * 5
    (values, errors), enricher = run(enrich_http(service, keys, chunk_size=10, max_in_flight=4))
    assert values == reference(keys) and errors == [None] * len(keys)
    assert service.requests == 15 and set(service.keys_per_request) == {10}  # 150 distinct keys, 10 a request
    assert set(service.attempts.values()) == {1}
    assert enricher.stats.as_dict() | {"failed": 0} == {
        "rows": 605, "null_keys": 5, "cache_hits": 0, "keys_looked_up": 150, "requests": 15, "retries": 0, "failed": 0,
        "timeout": 0, "lookup_error": 0, "missing": 0, "bad_result": 0, "bad_value": 0}


def test_in_flight_requests_never_exceed_the_cap(service):
    service.reset(latency_ms=30)
    keys = [f"k{i}" for i in range(400)]
    (values, _), _ = run(enrich_http(service, keys, chunk_size=5, max_in_flight=3))
    assert values == reference(keys)
    assert service.requests == 80
    assert service.max_in_flight == 3  # reached (80 chunks wait for 3 slots), never passed


def test_the_rate_never_exceeds_the_limit(service):
    service.reset(latency_ms=0)
    keys = [f"r{i}" for i in range(22)]
    (values, _), _ = run(enrich_http(service, keys, chunk_size=1, max_in_flight=22, rate_limit=10))
    assert values == reference(keys) and service.requests == 22
    # 22 calls at 10/s: spaced >= 100 ms apart, so any 1 s window holds at most 10 + 1
    assert max_in_window(service.all_times(), 1.0) <= 11
    assert max_in_window(service.all_times(), 0.1) <= 2


def test_5xx_are_retried_then_routed_with_a_reason_not_lost(service):
    service.reset(latency_ms=5, fail_first={"a": 2, "b": 1}, always_fail={"dead"})
    keys = ["a", "b", "dead", "c", "a", "dead", None]
    (values, errors), enricher = run(enrich_http(service, keys, chunk_size=1, retries=2, backoff_ms=10, seed=1))
    assert len(values) == len(keys)
    assert values == [value_of("a"), value_of("b"), None, value_of("c"), value_of("a"), None, None]
    assert errors == [None, None, "lookup_error: ClientResponseError", None, None, "lookup_error: ClientResponseError", None]
    assert service.attempts == {"a": 3, "b": 2, "dead": 3, "c": 1}  # retries + 1 at most
    assert enricher.stats.retries == 2 + 1 + 2 and enricher.stats.failed == {"lookup_error": 2}


def test_timeouts_are_retried_then_routed(service):
    service.reset(latency_ms=5, slow_ms=1500, slow_first={"late": 1}, always_slow={"stuck"})
    keys = ["late", "stuck", "ok"]
    (values, errors), enricher = run(enrich_http(service, keys, chunk_size=1, timeout_ms="200 milliseconds", retries=1,
                                                 backoff_ms=0))
    assert values == [value_of("late"), None, value_of("ok")]
    assert errors == [None, "timeout", None]
    assert service.attempts == {"late": 2, "stuck": 2, "ok": 1}
    assert enricher.stats.as_dict()["timeout"] == 1


def test_a_failing_chunk_fails_only_its_own_keys(service):
    service.reset(latency_ms=5, always_fail={"k3"})
    keys = [f"k{i}" for i in range(10)]
    (values, errors), _ = run(enrich_http(service, keys, chunk_size=2, retries=0))
    failed = [k for k, e in zip(keys, errors) if e is not None]
    assert failed == ["k2", "k3"]  # the chunk [k2, k3]
    assert [v for k, v in zip(keys, values) if k not in failed] == reference([k for k in keys if k not in failed])


def test_unordered_emits_in_completion_order_ordered_keeps_input_order(service):
    service.reset(latency_ms=5, key_latency_ms={"slow": 300})
    keys = ["slow", "x", "y", "z", "slow"]

    async def both():
        lookup = HttpLookup(service.url)
        enricher = Enricher(lookup, EnrichConfig(chunk_size=1, max_in_flight=4))
        try:
            parts = [part async for part in enricher.parts(keys)]
            ordered = await enricher.enrich(keys)
            return parts, ordered
        finally:
            await lookup.aclose()

    parts, ordered = run(both())
    assert [p.indices for p in parts][-1] == [0, 4]  # the slow key's rows come last
    assert sorted(i for p in parts for i in p.indices) == list(range(5))
    assert ordered.values == reference(keys)


def test_cache_with_ttl():
    now = [0.0]
    calls = []

    async def lookup(keys):
        calls.append(list(keys))
        return {k: k * 2 for k in keys}

    enricher = Enricher(lookup, EnrichConfig(cache_ttl_ms="10 seconds"), clock=lambda: now[0])
    assert run(enricher.enrich([1, 2, 2])).values == [2, 4, 4]
    now[0] = 9.0
    assert run(enricher.enrich([2, 3, 1])).values == [4, 6, 2]
    now[0] = 11.0  # 1 and 2 expired (put at 0), 3 not (put at 9)
    assert run(enricher.enrich([1, 3])).values == [2, 6]
    assert calls == [[1, 2], [3], [1]]
    assert enricher.stats.cache_hits == 3


def test_lookup_contract_violations_are_errors_of_the_chunk_not_retried():
    calls = []

    async def short(keys):
        calls.append(keys)
        return keys[:-1]

    async def as_dict(keys):
        return {k: k.upper() for k in keys if k != "gone"}

    async def not_a_list(keys):
        return 42

    result = run(Enricher(short, EnrichConfig(chunk_size=3, retries=3)).enrich(["a", "b", "c", "d"]))
    assert result.errors == ["bad_result: 2 values for 3 keys"] * 3 + ["bad_result: 0 values for 1 keys"]
    assert result.values == [None] * 4
    assert len(calls) == 2  # one call per chunk, no retry
    result = run(Enricher(as_dict).enrich(["a", "gone", None]))
    assert result == (["A", None, None], [None, "missing", None])
    result = run(Enricher(not_a_list).enrich(["a"]))
    assert result.errors == ["bad_result: the lookup returned int, not a list or dict"]


def test_retry_backoff_is_exponential_capped_and_seeded():
    config = EnrichConfig(backoff_ms=100, max_backoff_ms=300, jitter=False)
    assert [config.backoff_s(a) for a in range(4)] == [0.1, 0.2, 0.3, 0.3]
    jittered = EnrichConfig(backoff_ms=100, jitter=True)
    assert 0.05 <= jittered.backoff_s(0, 0.0) <= jittered.backoff_s(0, 1.0) == 0.1

    async def failing(keys):
        raise ConnectionError("down")

    def sleeps(seed):
        slept = []

        async def fake_sleep(delay):
            slept.append(delay)

        async def go():
            enricher = Enricher(failing, EnrichConfig(retries=3, seed=seed, chunk_size=1))
            original = asyncio.sleep
            asyncio.sleep = fake_sleep
            try:
                return await enricher.enrich(["k"])
            finally:
                asyncio.sleep = original

        assert run(go()).errors == ["lookup_error: ConnectionError"]
        return slept

    assert sleeps(7) == sleeps(7) and len(sleeps(7)) == 3 and sleeps(7) != sleeps(8)


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(keys=st.lists(st.one_of(st.none(), st.integers(0, 30)), max_size=80), chunk_size=st.integers(1, 7),
       in_flight=st.integers(1, 4), ordered=st.booleans())
def test_generated_keys_equal_the_reference(keys, chunk_size, in_flight, ordered):
    table = {k: {"id": k, "sq": k * k} for k in range(0, 31, 2)}  # odd keys are missing
    active = [0, 0]

    async def lookup(batch):
        active[0] += 1
        active[1] = max(active[1], active[0])
        await asyncio.sleep(0.001 * (len(batch) % 3))
        active[0] -= 1
        return {k: table[k] for k in batch if k in table}

    async def go():
        enricher = Enricher(lookup, EnrichConfig(chunk_size=chunk_size, max_in_flight=in_flight, ordered=ordered))
        if ordered:
            return await enricher.enrich(keys)
        values, errors = [None] * len(keys), [None] * len(keys)
        seen = []
        async for part in enricher.parts(keys):
            seen += part.indices
            for i, v, e in zip(*part):
                values[i], errors[i] = v, e
        assert sorted(seen) == list(range(len(keys)))  # every row once
        return values, errors

    values, errors = run(go())
    assert list(values) == [None if k is None else table.get(k) for k in keys]
    assert list(errors) == [None if k is None or k in table else "missing" for k in keys]
    assert active[1] <= in_flight


def test_only_async_lookups_are_accepted():
    def sync_lookup(keys):
        return keys

    async def async_lookup(keys, extra):
        return keys

    with pytest.raises(TypeError, match="lookup must be an async function"):
        Enricher(sync_lookup)
    with pytest.raises(TypeError, match="lookup must be an async function"):
        Enricher(lambda keys: keys)
    Enricher(functools.partial(async_lookup, extra=1))  # a partial of an async function is one
    Enricher(HttpLookup("http://127.0.0.1:1/"))  # an object with async __call__ too
