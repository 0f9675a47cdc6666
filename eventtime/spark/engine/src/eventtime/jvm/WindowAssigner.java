package eventtime.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.time.DayOfWeek;
import java.time.ZoneId;

/**
 * The windows a record's event time belongs to, one type per window kind, as in
 * eventtime/core/window.py: {@link FixedGrid} (Tumbling, Sliding) and {@link CalendarWindows}
 * are {@link SlicedAssigner}s, {@link SessionWindows} merge. Windows are half-open [start, end).
 */
abstract class WindowAssigner implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Whether windows merge per key (sessions) instead of lying on slices. */
  abstract boolean merging();

  /** The assigner of the plan's {@code config.window} (eventtime/plan.schema.json). */
  static WindowAssigner read(JsonNode w) {
    String type = Spec.field(w, "type", "config.window").asText();
    if (Contract.WINDOW_SESSION.equals(type)) return new SessionWindows(Spec.field(w, "gap_ms", "config.window").asLong());
    if (Contract.WINDOW_CALENDAR.equals(type)) {
      String unit = Spec.field(w, "unit", "config.window").asText();
      int code = java.util.Arrays.asList(Contract.UNIT_DAY, Contract.UNIT_WEEK, Contract.UNIT_MONTH).indexOf(unit);
      if (code < 0) throw new IllegalArgumentException("eventtime: unknown calendar unit " + unit);
      DayOfWeek weekStart = code == CalendarWindows.WEEK
          ? DayOfWeek.valueOf(Spec.field(w, "week_start", "config.window").asText().toUpperCase(java.util.Locale.ROOT)) : null;
      return new CalendarWindows(code, ZoneId.of(Spec.field(w, "tz", "config.window").asText()), weekStart);
    }
    long size = Spec.field(w, "size_ms", "config.window").asLong();
    long slide = Contract.WINDOW_SLIDING.equals(type) ? Spec.field(w, "slide_ms", "config.window").asLong() : size;
    if (!Contract.WINDOW_SLIDING.equals(type) && !Contract.WINDOW_TUMBLING.equals(type)) {
      throw new IllegalArgumentException("eventtime: unknown window type " + type);
    }
    return new FixedGrid(size, slide, Spec.field(w, "offset_ms", "config.window").asLong());
  }
}
