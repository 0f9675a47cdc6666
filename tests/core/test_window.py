"""Window assigners: alignment, offsets, time zones and every boundary at equality."""

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventtime import Calendar, Session, Sliding, Tumbling, Window

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
        (lambda: Tumbling(1000, tz="Asia/Shanghai"), r"tz='Asia/Shanghai' is a named zone .* use Calendar\('day', tz='Asia/Shanghai'\)"),
        (lambda: Tumbling(1000, tz="noon"), "tz must be a fixed UTC offset"),
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


# --- Calendar windows ---------------------------------------------------------------------

BERLIN_SPRING_DAY = Window(1_711_839_600_000, 1_711_922_400_000)  # 2024-03-31, 23 hours
BERLIN_AUTUMN_DAY = Window(1_729_980_000_000, 1_730_070_000_000)  # 2024-10-27, 25 hours


@pytest.mark.parametrize("day", [BERLIN_SPRING_DAY, BERLIN_AUTUMN_DAY], ids=["23h", "25h"])
def test_calendar_day_boundaries_at_equality_on_dst_days(day):
    berlin = Calendar("day", tz="Europe/Berlin")
    assert berlin.assign(day.start_ms) == [day]
    assert berlin.assign(day.end_ms - 1) == [day]
    assert berlin.assign(day.end_ms)[0].start_ms == day.end_ms
    assert berlin.assign(day.start_ms - 1)[0].end_ms == day.start_ms
    assert (day.end_ms - day.start_ms) // HOUR in (23, 25)


def test_calendar_month_has_its_real_length_and_starts_at_local_midnight():
    months = Calendar("month", tz="UTC+8")
    feb = months.assign(1_709_222_399_999)[0]  # 2024-02-29T23:59:59.999 local
    assert feb == Window(1_706_716_800_000, 1_709_222_400_000)
    assert (feb.end_ms - feb.start_ms) == 29 * DAY
    assert months.assign(feb.end_ms)[0].start_ms == feb.end_ms


def test_calendar_week_start_and_the_fall_back_week():
    sunday_weeks = Calendar("week", tz="America/New_York", week_start="sunday")
    week = sunday_weeks.assign(1_730_606_400_000)[0]  # Sunday 2024-11-03 00:00 EDT
    assert week == Window(1_730_606_400_000, 1_731_214_800_000)
    assert (week.end_ms - week.start_ms) // HOUR == 169
    monday_weeks = Calendar("week", tz="America/New_York")
    assert monday_weeks.assign(1_730_606_400_000)[0].end_ms == 1_730_696_400_000  # Monday 4 Nov 00:00 EST


def test_calendar_day_in_a_fixed_zone_is_the_tumbling_day():
    for tz in ("UTC+8", "UTC-05:30", "UTC"):
        for ts in (0, 1_700_000_000_000, 1_709_222_399_999, -1):
            assert Calendar("day", tz=tz).assign(ts) == Tumbling("1 day", tz=tz).assign(ts)


def test_a_local_midnight_inside_a_dst_gap_starts_the_day_when_the_gap_starts():
    # Havana springs forward at 00:00 on 2024-03-10: local midnight does not exist, the day
    # starts at the gap (05:00Z) and is 23 hours long.
    day = Calendar("day", tz="America/Havana").assign(1_710_072_000_000)[0]  # 2024-03-10T12:00Z
    assert day == Window(1_710_046_800_000, 1_710_129_600_000)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.sampled_from(["day", "week", "month"]),
    st.sampled_from(["Europe/Berlin", "America/New_York", "America/Havana", "Australia/Lord_Howe", "UTC+8", "UTC-05:30"]),
    st.sampled_from(["monday", "sunday"]),
    st.integers(-(10**12), 4 * 10**12),
)
def test_calendar_windows_tile_time_without_gaps(unit, tz, week_start, ts):
    calendar = Calendar(unit, tz=tz, week_start=week_start)
    (window,) = calendar.assign(ts)
    assert window.start_ms <= ts < window.end_ms
    assert calendar.assign(window.start_ms) == [window] == calendar.assign(window.end_ms - 1)
    assert calendar.assign(window.end_ms)[0].start_ms == window.end_ms  # the next one starts where this ends
    assert calendar.assign(window.start_ms - 1)[0].end_ms == window.start_ms
    assert calendar.windows_of_slice(calendar.slice_start(ts)) == [window] and calendar.slices_of(window) == [window.start_ms]


@pytest.mark.parametrize(
    "kwargs, error, names",
    [
        ({"unit": "year"}, ValueError, "unit"),
        ({"unit": 1}, TypeError, "unit"),
        ({"unit": "week", "week_start": "funday"}, ValueError, "week_start"),
        ({"unit": "day", "tz": "Mars/Olympus"}, ValueError, "tz"),
        ({"unit": "day", "tz": 8}, TypeError, "tz"),
    ],
)
def test_calendar_refuses_bad_parameters_naming_them(kwargs, error, names):
    with pytest.raises(error, match=names):
        Calendar(**kwargs)


def test_tumbling_in_a_dst_zone_points_to_calendar():
    with pytest.raises(ValueError, match=r"Calendar\('day', tz='Europe/Berlin'\)"):
        Tumbling("1 day", tz="Europe/Berlin")


def test_calendar_round_trips_through_the_replay_contract():
    from eventtime.harness.scenario import _window

    for calendar in (Calendar("day", tz="Europe/Berlin"), Calendar("week", tz="UTC+8", week_start="sunday"), Calendar("month")):
        assert _window(calendar.to_dict()) == calendar


# --- Session windows ------------------------------------------------------------------------

def test_session_merge_at_equality_touching_windows_stay_apart():
    assert Session(10).merge([Window(0, 10), Window(10, 20)]) == [Window(0, 10), Window(10, 20)]
    assert Session(10).merge([Window(0, 10), Window(9, 19)]) == [Window(0, 19)]
    assert Session(10).merge([Window(20, 30), Window(0, 10), Window(5, 25)]) == [Window(0, 30)]


def test_session_accepts_durations_and_refuses_bad_gaps_naming_them():
    assert Session("30 minutes").gap_ms == 1_800_000 == Session(timedelta(minutes=30)).gap_ms
    assert Session(1000).to_dict() == {"type": "session", "gap_ms": 1000}
    with pytest.raises(ValueError, match="gap must be > 0"):
        Session(0)
    with pytest.raises(ValueError, match="gap"):
        Session("soon")
    with pytest.raises(TypeError, match="gap"):
        Session([1])


@pytest.mark.parametrize(
    "window, message",
    [
        ({"type": "session"}, "window.gap_ms is required"),
        ({"type": "session", "gap_ms": "10"}, "window.gap_ms must be an integer"),
        ({"type": "session", "gap_ms": 0}, "gap must be > 0"),
        ({"type": "session", "gap_ms": 10, "size_ms": 5}, "unknown field"),
        ({"type": "calendar", "unit": "day"}, "window.tz is required"),
        ({"type": "hopping"}, "window.type must be one of"),
    ],
)
def test_replay_contract_refuses_bad_window_objects(window, message):
    from eventtime.harness.scenario import ScenarioError, _window

    with pytest.raises(ScenarioError, match=message):
        _window(window)
