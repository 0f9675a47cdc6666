"""What the transactional sinks share (sinks/exactly_once.py): the fault hook, seen from both
kinds of sink (the Delta sinks and BatchSink, here a store in memory)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from eventtime.sinks import BatchSink, DeltaLateSink, FaultPoint


class MemorySink(BatchSink):
    """A store in memory: every statement succeeds, the ledger is a set."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ledger: set = set()

    def connect(self): return object()
    def close(self, conn): pass
    def begin(self, conn): pass
    def commit(self, conn): pass
    def rollback(self, conn): pass
    def savepoint(self, conn): pass
    def release_savepoint(self, conn): pass
    def rollback_to_savepoint(self, conn): pass
    def committed(self, conn, query_id, batch_id): return (query_id, batch_id) in self.ledger
    def record(self, conn, query_id, batch_id, rows, rejected): self.ledger.add((query_id, batch_id))
    def reject(self, conn, query_id, rejected): pass
    def write_rows(self, conn, columns, rows): pass
    def is_transient(self, exc): return isinstance(exc, ConnectionError)


def raising(exc):
    def hook(point):
        raise exc
    return hook


def test_a_batch_sink_calls_the_hook_with_a_fault_point_at_each_stage_in_order():
    points = []

    def hook(point):
        points.append(point)
        if point.stage == "chunk" and point.chunk == 1 and point.attempt == 0:
            raise ConnectionError("simulated")

    result = MemorySink("p", max_rows=2, backoff_s=0, fault_injector=hook)(pa.table({"x": [1, 2, 3]}), 4, "q")
    assert result.written and result.attempts == 2 and result.chunks == 2
    assert points == [
        FaultPoint("begin", 4, 0), FaultPoint("chunk", 4, 0, 0), FaultPoint("chunk", 4, 0, 1),
        FaultPoint("begin", 4, 1), FaultPoint("chunk", 4, 1, 0), FaultPoint("chunk", 4, 1, 1),
        FaultPoint("before_commit", 4, 1), FaultPoint("after_commit", 4, 1),
    ]


def test_a_delta_sink_calls_the_hook_before_each_write_attempt(tmp_path):
    points = []

    def hook(point):
        points.append(point)
        if point.attempt == 0:
            raise OSError("simulated storage fault")

    sink = DeltaLateSink(str(tmp_path / "late"), pipeline="p", engine="rust", fault_injector=hook,
                         sleep=lambda s: None)
    assert sink(pa.table({"kind": ["invalid"], "reason": ["null_timestamp"]}), 3, "q").attempts == 2
    assert points == [FaultPoint("write", 3, 0), FaultPoint("write", 3, 1)]
    assert points[0].chunk is None


@pytest.mark.parametrize("hook", [lambda batch_id, attempt: None, lambda stage, batch_id, attempt, chunk: None])
def test_a_hook_of_an_earlier_signature_is_refused_naming_fault_injector(tmp_path, hook):
    for make in (lambda: MemorySink("p", fault_injector=hook),
                 lambda: DeltaLateSink(str(tmp_path / "late"), pipeline="p", engine="rust", fault_injector=hook)):
        with pytest.raises(TypeError, match=r"fault_injector must be callable as fault_injector\(point\)"):
            make()
    with pytest.raises(TypeError, match="fault_injector must be callable"):
        MemorySink("p", fault_injector="not a hook")


def test_both_kinds_of_sink_return_one_result_type_and_the_old_name_is_an_alias(tmp_path):
    from eventtime.sinks import BatchWriteResult, WriteResult

    assert BatchWriteResult is WriteResult
    batch = MemorySink("p")(pa.table({"x": [1]}), 0, "q")
    delta = DeltaLateSink(str(tmp_path / "late"), pipeline="p", engine="rust")(
        pa.table({"kind": ["invalid"], "reason": ["null_timestamp"]}), 0, "q")
    assert type(batch) is type(delta) is WriteResult
    assert (batch.written, batch.rows, batch.attempts, batch.chunks, batch.version) == (True, 1, 1, 1, None)
    assert (delta.written, delta.rows, delta.attempts, delta.chunks, delta.version) == (True, 1, 1, 0, 0)


def test_the_retry_loop_reports_what_on_error_returns_and_stops_when_it_raises():
    from eventtime.sinks.exactly_once import RetryPolicy, SinkError, run_with_retries

    seen, waits = [], []

    def on_error(exc, attempt, delay):
        seen.append((str(exc), attempt, delay))
        return ValueError(f"cause of {exc}")

    def give_up(exc, attempts):
        return SinkError(f"{exc} after {attempts}", batch_id=0, query_id="q", attempts=attempts)

    def always(attempt):
        raise OSError(f"fault {attempt}")

    with pytest.raises(SinkError, match="cause of fault 2 after 3") as info:
        run_with_retries(RetryPolicy(2, 0.5), always, on_error=on_error, give_up=give_up, sleep=waits.append)
    assert isinstance(info.value.__cause__, ValueError) and info.value.attempts == 3
    assert seen == [("fault 0", 0, 0.5), ("fault 1", 1, 1.0), ("fault 2", 2, None)] and waits == [0.5, 1.0]

    def stop(exc, attempt, delay):
        raise KeyError("not transient")

    with pytest.raises(KeyError):
        run_with_retries(RetryPolicy(2, 0.5), always, on_error=stop, give_up=give_up, sleep=waits.append)
    assert waits == [0.5, 1.0]


def test_a_batch_sink_retries_a_transient_error_then_gives_up_and_fails_at_once_on_any_other():
    from eventtime.sinks import BatchSinkError

    waits = []
    failing = MemorySink("p", target="t", retries=2, backoff_s=0.1, sleep=waits.append,
                         fault_injector=raising(ConnectionError("gone")))
    with pytest.raises(BatchSinkError, match="t: batch 5 of query q not written after 3 attempts: ConnectionError: gone"):
        failing(pa.table({"x": [1]}), 5, "q")
    assert waits == [0.1, 0.2]
    broken = MemorySink("p", target="t", retries=2, sleep=waits.append,
                        fault_injector=raising(KeyError("bad")))
    with pytest.raises(BatchSinkError, match="t: batch 5 of query q failed: KeyError") as info:
        broken(pa.table({"x": [1]}), 5, "q")
    assert info.value.attempts == 1 and waits == [0.1, 0.2]
