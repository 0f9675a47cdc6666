"""Window assigners: alignment, offsets, time zones and every boundary at equality."""

from datetime import timedelta

import pytest

from eventtime import Sliding, Tumbling, Window

DAY = 86_400_000
HOUR = 3_600_000


@pytest.mark.parametrize(
    "ts, expected",
    [(3000, Window(3000, 6000)), (5999, Window(3000, 6000)), (6000, Window(6000, 9000)), (2999, Window(0, 3000))],
    ids=["at-start", "at-end-minus-1", "at-end", "just-before-start"],
)
def test_tumbling_boundaries_at_equality(ts, expected):
    assert Tumbling(3000).assign(ts) == [expected]


def test_tumbling_accepts_timedelta_string_and_int_alike():
    assert Tumbling(timedelta(minutes=10)) == Tumbling("10 minutes") == Tumbling(600_000)
    assert Tumbling("1 day").size_ms == DAY


def test_one_day_window_in_utc_plus_8_starts_at_16_utc():
    window = Tumbling("1 day", tz="UTC+8")
    # 2023-11-14T15:59:59.999Z is 23:59:59.999 local, 16:00Z is local midnight.
    local_midnight = 1_699_977_600_000  # 2023-11-14T16:00:00Z
    assert window.assign(local_midnight) == [Window(local_midnight, local_midnight + DAY)]
    assert window.assign(local_midnight - 1) == [Window(local_midnight - DAY, local_midnight)]
    assert Tumbling("1 day", tz="+08:00") == window == Tumbling("1 day", offset="16 hours")


@pytest.mark.parametrize("tz, offset_hours", [("UTC", 0), ("UTC+8", 8), ("+08:00", 8), ("UTC-05:30", -5.5), ("GMT+14", 14)])
def test_fixed_time_zones(tz, offset_hours):
    window = Tumbling("1 day", tz=tz)
    local_midnight_utc = int(-offset_hours * HOUR) % DAY
    assert window.offset_ms == local_midnight_utc


def test_negative_offset_is_the_same_grid_as_its_positive_remainder():
    assert Tumbling(3000, offset=-1000) == Tumbling(3000, offset=2000)
    assert Tumbling(3000, offset=-1000).assign(2000) == [Window(2000, 5000)]
    assert Tumbling(3000, offset=-1000).assign(1999) == [Window(-1000, 2000)]


def test_sliding_assigns_every_window_containing_the_timestamp():
    sliding = Sliding(3000, 1000)
    assert sliding.assign(2000) == [Window(0, 3000), Window(1000, 4000), Window(2000, 5000)]
    assert sliding.assign(2999) == [Window(0, 3000), Window(1000, 4000), Window(2000, 5000)]
    assert sliding.assign(3000) == [Window(1000, 4000), Window(2000, 5000), Window(3000, 6000)]


def test_sliding_with_size_not_a_multiple_of_slide():
    sliding = Sliding(5000, 2000)
    for ts in range(0, 20_000, 250):
        windows = sliding.assign(ts)
        assert all(w.start_ms <= ts < w.end_ms for w in windows)
        assert len(windows) in (2, 3)
    assert sliding.slice_ms == 1000


def test_slices_tile_each_window_exactly():
    sliding = Sliding(5000, 2000, offset=300)
    for ts in range(10_000, 30_000, 137):
        slice_start = sliding.slice_start(ts)
        assert slice_start <= ts < slice_start + sliding.slice_ms
        assert sliding.windows_of_slice(slice_start) == sliding.assign(ts)
        for window in sliding.assign(ts):
            slices = sliding.slices_of(window)
            assert slices[0] == window.start_ms and slices[-1] + sliding.slice_ms == window.end_ms


def test_sliding_equal_to_size_is_tumbling_grid():
    assert Sliding(3000, 3000).assign(4500) == Tumbling(3000).assign(4500)


@pytest.mark.parametrize(
    "factory, message",
    [
        (lambda: Tumbling(0), "size must be > 0"),
        (lambda: Tumbling("-1 minute"), "size must be > 0"),
        (lambda: Sliding(1000, 0), "slide must satisfy"),
        (lambda: Sliding(1000, 2000), "slide must satisfy"),
        (lambda: Tumbling("10 parsecs"), "size must look like"),
        (lambda: Tumbling(1000, tz="Asia/Shanghai"), "tz must be a fixed UTC offset"),
        (lambda: Tumbling(1000, tz="UTC+15"), "tz must be between"),
    ],
)
def test_bad_values_name_the_parameter(factory, message):
    with pytest.raises(ValueError, match=message):
        factory()


@pytest.mark.parametrize(
    "factory, message",
    [
        (lambda: Tumbling(1.5), "size must be int milliseconds"),
        (lambda: Tumbling(True), "size must be int milliseconds"),
        (lambda: Sliding(1000, None), "slide must be int milliseconds"),
        (lambda: Tumbling(1000, tz=8), "tz must be a string"),
    ],
)
def test_wrong_types_raise_type_error_naming_the_parameter(factory, message):
    with pytest.raises(TypeError, match=message):
        factory()


def test_assigners_are_frozen():
    window = Tumbling(1000)
    with pytest.raises(AttributeError):
        window.size_ms = 5
