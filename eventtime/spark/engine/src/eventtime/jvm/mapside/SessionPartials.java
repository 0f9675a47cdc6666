package eventtime.jvm.mapside;

import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import eventtime.jvm.window.SessionWindows;

/**
 * One key's partial sessions in a map task (the map-side combine of session windows): disjoint
 * sessions [start, end), each with its accumulators, merged as the task's foldable rows arrive by
 * the operator's rule ({@link Spec#sessionsOverlap}). The operator merges them as it merges rows: a set of intervals has the same
 * connected unions whether some of them were joined first or not.
 */
final class SessionPartials {
  long[] starts = new long[2];
  long[] ends = new long[2];
  Acc[][] accs = new Acc[2][];
  int n;

  /** The accumulators of the partial session a row at ts joins (its own [ts, ts + gap) merged in). */
  Acc[] add(Spec spec, long ts, int na) {
    long s = ts, e = spec.sessions.ownSessionEnd(ts);
    int into = -1;
    for (int i = 0; i < n; i++) {
      if (!SessionWindows.overlap(s, e, starts[i], ends[i])) continue;
      s = Math.min(s, starts[i]);
      e = Math.max(e, ends[i]);
      if (into < 0) {
        into = i;
      } else {
        for (int a = 0; a < na; a++) accs[into][a].merge(spec, a, accs[i][a]);
        remove(i--);
      }
    }
    if (into < 0) {
      if (n == starts.length) {
        starts = java.util.Arrays.copyOf(starts, n * 2);
        ends = java.util.Arrays.copyOf(ends, n * 2);
        accs = java.util.Arrays.copyOf(accs, n * 2);
      }
      into = n++;
      accs[into] = new Acc[na];
      for (int a = 0; a < na; a++) accs[into][a] = new Acc();
    }
    starts[into] = s;
    ends[into] = e;
    return accs[into];
  }

  private void remove(int i) {
    n--;
    starts[i] = starts[n];
    ends[i] = ends[n];
    accs[i] = accs[n];
    accs[n] = null;
  }
}
