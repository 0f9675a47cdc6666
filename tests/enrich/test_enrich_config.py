"""Options are checked when the step is made: TypeError for a wrong type, ValueError for a
bad value, the message naming the parameter and the value."""

from __future__ import annotations

from datetime import timedelta

import pytest

import eventtime
from eventtime.enrich import EnrichConfig


async def lookup(keys):
    return keys


def test_durations_accept_ms_timedelta_and_spark_strings():
    config = EnrichConfig(timeout_ms=timedelta(seconds=2), backoff_ms="200 milliseconds", max_backoff_ms=1000,
                          cache_ttl_ms="5 minutes")
    assert (config.timeout_ms, config.backoff_ms, config.max_backoff_ms, config.cache_ttl_ms) == (2000, 200, 1000, 300_000)


@pytest.mark.parametrize("options, error, message", [
    ({"chunk_size": 0}, ValueError, "chunk_size must be >= 1, got 0"),
    ({"chunk_size": 2.5}, TypeError, "chunk_size must be an int, got float 2.5"),
    ({"max_in_flight": True}, TypeError, "max_in_flight must be an int, got bool True"),
    ({"rate_limit": 0}, ValueError, r"rate_limit must be a finite number > 0 \(requests per second\), got 0"),
    ({"rate_limit": "10/s"}, TypeError, "rate_limit must be a number of requests per second or None, got str '10/s'"),
    ({"timeout_ms": "soon"}, ValueError, "timeout_ms must look like '10 minutes'.*got 'soon'"),
    ({"timeout_ms": 0}, ValueError, "timeout_ms must be >= 1 ms, got 0"),
    ({"retries": -1}, ValueError, "retries must be >= 0, got -1"),
    ({"backoff_ms": 500, "max_backoff_ms": 100}, ValueError, r"max_backoff_ms must be >= backoff_ms \(500\), got 100"),
    ({"ordered": "yes"}, TypeError, "ordered must be a bool, got str 'yes'"),
    ({"cache_ttl_ms": 1.5}, TypeError, "cache_ttl_ms must be int milliseconds"),
    ({"on_failure": "drop"}, ValueError, r"on_failure must be one of \('null', 'invalid'\), got 'drop'"),
])
def test_bad_options_name_the_parameter_and_value(options, error, message):
    with pytest.raises(error, match=message):
        EnrichConfig(**options)
    renamed = {{"timeout_ms": "timeout", "backoff_ms": "backoff", "max_backoff_ms": "max_backoff",
                "cache_ttl_ms": "cache_ttl"}.get(k, k): v for k, v in options.items()}
    with pytest.raises(error):  # enrich_async checks the same when it is called, before any DataFrame
        eventtime.enrich_async(lookup, key="user", output="profile", **renamed)


def test_enrich_async_checks_its_own_arguments_when_called():
    def sync_lookup(keys):
        return keys

    with pytest.raises(TypeError, match="lookup must be an async function 'async def lookup"):
        eventtime.enrich_async(sync_lookup, key="user", output="profile")
    with pytest.raises(TypeError, match="key must be a str, got int 3"):
        eventtime.enrich_async(lookup, key=3, output="profile")
    with pytest.raises(ValueError, match="error_col must differ from output"):
        eventtime.enrich_async(lookup, key="user", output="p", error_col="p")
    with pytest.raises(ValueError, match="output must not start with '__et_'"):
        eventtime.enrich_async(lookup, key="user", output="__et_p")


def test_import_eventtime_does_not_import_spark():
    import subprocess
    import sys

    code = ("import sys, eventtime, eventtime.enrich; eventtime.EnrichConfig; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
