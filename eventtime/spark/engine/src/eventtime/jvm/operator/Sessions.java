package eventtime.jvm.operator;

import eventtime.jvm.mapside.Mapper;
import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import eventtime.jvm.state.Bytes;
import eventtime.jvm.window.SessionWindows;
import eventtime.jvm.window.Trigger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;

/**
 * The session windows of one user key (docs/semantics.md, "Session windows"): disjoint
 * sessions [start, end), each with its accumulators, pane index and the bounds of this lineage's
 * panes still shown as current (a merged session's next pane replaces them: merged_from).
 * The same rules as eventtime/core/reference.py, held to it by the transcript and property tests.
 */
final class Sessions {
  /** One session. */
  static final class Sess {
    long start, end;
    Acc[] all;
    /** What arrived since the last pane (discarding mode only, else null). */
    Acc[] since;
    /** A pane was emitted at exactly these bounds. */
    boolean fired;
    long nextIndex;
    /** start -> end of the panes of this lineage shown as current (disjoint, so starts are unique). */
    final TreeMap<Long, Long> shown = new TreeMap<>();
  }

  /** Receives the rows a key's sessions produce. */
  interface Emit {
    void pane(Sess s, String timing, long index, boolean fin, Acc[] values, List<long[]> mergedFrom);

    void late(Row r, long ts, long ws, long we);
  }

  final TreeMap<Long, Sess> byStart = new TreeMap<>();
  /** The event this key is listed under in the bucket's {@link DueIndex} (MIN_VALUE: none). */
  long indexedEvent = Long.MIN_VALUE;
  private final Spec spec;
  private final int na;

  Sessions(Spec spec, int na) {
    this.spec = spec;
    this.na = na;
  }

  boolean isEmpty() {
    return byStart.isEmpty();
  }


  // --- encoding ------------------------------------------------------------------------------

  static Sessions decode(Spec spec, int na, byte[] bytes) {
    Sessions st = new Sessions(spec, na);
    Bytes.In in = new Bytes.In(bytes);
    st.indexedEvent = in.readVarLong();
    int n = (int) in.readVarLong();
    long previous = 0;
    for (int k = 0; k < n; k++) {
      Sess s = new Sess();
      s.start = previous + in.readVarLong();
      s.end = s.start + in.readVarLong();
      previous = s.start;
      s.fired = in.readBoolean();
      s.nextIndex = in.readVarLong();
      int shown = (int) in.readVarLong();
      for (int j = 0; j < shown; j++) {
        long ws = in.readVarLong();
        s.shown.put(ws, ws + in.readVarLong());
      }
      s.all = new Acc[na];
      for (int i = 0; i < na; i++) s.all[i] = Acc.read(spec, i, in);
      if (spec.discarding) {
        s.since = new Acc[na];
        for (int i = 0; i < na; i++) s.since[i] = Acc.read(spec, i, in);
      }
      st.byStart.put(s.start, s);
    }
    return st;
  }

  byte[] encode() {
    Bytes.Out out = new Bytes.Out(64);
    out.writeVarLong(indexedEvent);
    out.writeVarLong(byStart.size());
    long previous = 0;
    for (Sess s : byStart.values()) {
      out.writeVarLong(s.start - previous);
      out.writeVarLong(s.end - s.start);
      previous = s.start;
      out.writeBoolean(s.fired);
      out.writeVarLong(s.nextIndex);
      out.writeVarLong(s.shown.size());
      for (Map.Entry<Long, Long> e : s.shown.entrySet()) {
        out.writeVarLong(e.getKey());
        out.writeVarLong(e.getValue() - e.getKey());
      }
      for (int i = 0; i < na; i++) s.all[i].write(spec, i, out);
      if (spec.discarding) for (int i = 0; i < na; i++) s.since[i].write(spec, i, out);
    }
    return out.toByteArray();
  }

  // --- the rules -----------------------------------------------------------------------------

  /** The next time a session of this key needs the watermark: an ON_TIME m or its cleanup time. */
  long nextEvent() {
    long next = Long.MAX_VALUE;
    for (Sess s : byStart.values()) {
      if (!spec.finalOnly && !s.fired) next = Math.min(next, Trigger.maxTimestamp(s.end));
      next = Math.min(next, spec.trigger.cleanupTime(s.end));
    }
    return next;
  }

  private void emitPane(Sess s, String timing, boolean fin, Emit emit) {
    List<long[]> mergedFrom = new ArrayList<>(s.shown.size());
    for (Map.Entry<Long, Long> e : s.shown.entrySet()) {
      if (e.getKey() != s.start || e.getValue() != s.end) mergedFrom.add(new long[] {e.getKey(), e.getValue()});
    }
    emit.pane(s, timing, s.nextIndex, fin, spec.discarding && !Contract.FINAL.equals(timing) ? s.since : s.all, mergedFrom);
    s.nextIndex++;
    s.fired = true;
    s.shown.clear();
    s.shown.put(s.start, s.end);
    if (spec.discarding) s.since = Acc.fresh(na);
  }

  /**
   * From wPrev to W: a session not fired at its bounds fires ON_TIME once due (FINAL at expiry
   * in final_only); an expired session is purged ({@link Spec#isDue}, {@link Spec#isExpired}).
   * Returns whether state changed.
   */
  boolean sweep(long wPrev, long watermark, Emit emit) {
    if (watermark <= wPrev) return false;
    boolean changed = false;
    for (Iterator<Sess> it = byStart.values().iterator(); it.hasNext(); ) {
      Sess s = it.next();
      boolean expired = spec.trigger.isExpired(s.end, watermark);
      if (spec.finalOnly) {
        if (expired) emitPane(s, Contract.FINAL, true, emit);
      } else if (!s.fired && Trigger.isDue(s.end, watermark)) {
        emitPane(s, Contract.ON_TIME, expired, emit);
        changed = true;
      }
      if (expired) {
        it.remove();
        changed = true;
      }
    }
    return changed;
  }

  /**
   * Adds a batch's data and partial rows of this key (already swept to W): the rows are merged with each
   * other and with the live sessions first; a row is late only when the session it ends up in
   * has expired ({@link Spec#isExpired}), which needs a session made of new rows alone. A due
   * session that received rows emits a LATE pane.
   */
  void add(List<Row> rows, Layout lay, long watermark, Emit emit) {
    int nr = rows.size();
    // a row's own session [ts, ts + gap), or a map-side partial session's bounds (Layout.PARTIAL)
    long[] ts = new long[nr], te = new long[nr];
    boolean[] partial = new boolean[nr];
    for (int j = 0; j < nr; j++) {
      Row r = rows.get(j);
      ts[j] = r.getLong(lay.ms);
      partial[j] = r.getInt(lay.cls) == Layout.PARTIAL;
      te[j] = partial[j] ? r.getLong(lay.tmax) : spec.sessions.ownSessionEnd(ts[j]);
    }
    // items: live sessions (index >= 0 into sessions) and rows (~j), ordered by start
    List<Sess> live = new ArrayList<>(byStart.values());
    Integer[] order = new Integer[live.size() + nr];
    for (int i = 0; i < live.size(); i++) order[i] = i;
    for (int j = 0; j < nr; j++) order[live.size() + j] = ~j;
    java.util.Arrays.sort(order, (a, b) -> Long.compare(a >= 0 ? live.get(a).start : ts[~a], b >= 0 ? live.get(b).start : ts[~b]));
    List<Sess> touched = new ArrayList<>();
    int i = 0;
    while (i < order.length) {
      long cs = Long.MAX_VALUE, ce = Long.MIN_VALUE;
      List<Sess> members = new ArrayList<>();
      List<Integer> mine = new ArrayList<>();
      int k = i;
      while (k < order.length) {
        int item = order[k];
        long s = item >= 0 ? live.get(item).start : ts[~item];
        long e = item >= 0 ? live.get(item).end : te[~item];
        if (k > i && !SessionWindows.overlap(cs, ce, s, e)) break;
        cs = Math.min(cs, s);
        ce = Math.max(ce, e);
        if (item >= 0) members.add(live.get(item));
        else mine.add(~item);
        k++;
      }
      i = k;
      if (mine.isEmpty()) continue;
      if (members.isEmpty() && spec.trigger.isExpired(ce, watermark)) {
        for (int j : mine) {
          if (partial[j]) {
            throw new IllegalStateException("eventtime: a map-side partial session [" + ts[j] + ", " + te[j]
                + ") expired under the operator's watermark " + watermark + " (the batch watermark published to the tasks was wrong)");
          }
          emit.late(rows.get(j), ts[j], cs, ce);
        }
        continue;
      }
      Sess n = new Sess();
      n.start = cs;
      n.end = ce;
      n.all = Acc.fresh(na);
      if (spec.discarding) n.since = Acc.fresh(na);
      for (Sess m : members) {
        Acc.mergeAll(spec, n.all, m.all);
        if (spec.discarding) Acc.mergeAll(spec, n.since, m.since);
        n.nextIndex = Math.max(n.nextIndex, m.nextIndex);
        n.shown.putAll(m.shown);
        if (m.fired && m.start == cs && m.end == ce) n.fired = true;
        byStart.remove(m.start);
      }
      for (int j : mine) {
        if (partial[j]) {
          Acc[] accs = Mapper.readPartial(lay, spec, rows.get(j));
          Acc.mergeAll(spec, n.all, accs);
          if (spec.discarding) Acc.mergeAll(spec, n.since, accs);
          continue;
        }
        Row rec = rows.get(j).getStruct(lay.rec);
        for (int a = 0; a < na; a++) {
          Object value = spec.aggInput(a, rec);
          n.all[a].add(spec, a, value, ts[j]);
          if (spec.discarding) n.since[a].add(spec, a, value, ts[j]);
        }
      }
      byStart.put(cs, n);
      touched.add(n);
    }
    if (!spec.finalOnly) {
      for (Sess s : touched) {
        if (Trigger.isDue(s.end, watermark)) emitPane(s, Contract.LATE, false, emit);
      }
    }
  }
}
