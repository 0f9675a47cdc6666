package eventtime.jvm.operator;

import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The operator's output rows ({@link Layout}'s output layout): a window's pane, a late record, an
 * invalid record, a partition's statistics.
 */
final class OutputRows {
  private final Spec spec;
  private final Layout lay;

  OutputRows(Spec spec, Layout lay) {
    this.spec = spec;
    this.lay = lay;
  }

  private Object[] outRow(String kind, Row key, int keyOffset) {
    Object[] o = new Object[lay.oWidth];
    o[0] = kind;
    for (int i = 0; i < lay.nk; i++) o[1 + i] = key.get(keyOffset + i);
    return o;
  }

  /** A pane of the window [ws, we); mergedFrom (sessions) the bounds of the panes it replaces, or null. */
  Row pane(Row key, long ws, long we, String timing, long index, boolean fin, Acc[] acc, long watermark, List<long[]> mergedFrom) {
    Object[] o = outRow(Contract.PANE, key, 0);
    o[lay.oWs] = ws;
    o[lay.oWe] = we;
    if (mergedFrom != null) {
      List<Row> bounds = new ArrayList<>(mergedFrom.size());
      for (long[] b : mergedFrom) bounds.add(RowFactory.create(b[0], b[1]));
      o[lay.oMerged] = CollectionConverters.asScala(bounds).toSeq();
    }
    o[lay.oTiming] = timing;
    o[lay.oIndex] = index;
    o[lay.oFinal] = fin;
    for (int i = 0; i < lay.na; i++) {
      o[lay.oAgg[i]] = acc[i].result(spec, i);
      if (lay.oAccA[i] >= 0) o[lay.oAccA[i]] = acc[i].accumulatorA(spec, i);
      if (lay.oAccB[i] >= 0) o[lay.oAccB[i]] = acc[i].n;
    }
    o[lay.oWatermark] = watermark;
    return RowFactory.create(o);
  }

  /** A late record of a fixed window: from its first window's start to its last window's end. */
  Row lateRecord(Row r, long ts, long watermark) {
    return lateRecord(r, ts, watermark, Contract.TOO_LATE, spec.sliced.firstWindowOf(ts), spec.sliced.lastWindowEnd(ts));
  }

  /** A record too late (reason) for the windows it belongs to that span [ws, we). */
  Row lateRecord(Row r, long ts, long watermark, String reason, long ws, long we) {
    Object[] o = outRow(Contract.LATE_RECORD, r, Layout.K0);
    o[lay.oReason] = reason;
    o[lay.oEventTime] = ts;
    o[lay.oRaw] = spec.rawText(r.getStruct(lay.rec));
    // Spark reports 0 before the first watermark: no watermark yet (null).
    o[lay.oWatermark] = watermark > 0 ? watermark : null;
    o[lay.oLateness] = watermark - ts;
    o[lay.oWs] = ws;
    o[lay.oWe] = we;
    o[lay.oPart] = r.get(lay.part);
    o[lay.oOff] = r.get(lay.off);
    o[lay.oRec] = r.get(lay.rec);
    return RowFactory.create(o);
  }

  /** A record with an invalid event time (its reason given by the map side). */
  Row invalidRecord(Row r, long watermark) {
    Object[] o = outRow(Contract.INVALID_RECORD, r, Layout.K0);
    o[lay.oReason] = r.get(lay.reason);
    o[lay.oRaw] = r.get(lay.raw);
    o[lay.oWatermark] = watermark > 0 ? watermark : null;
    o[lay.oPart] = r.get(lay.part);
    o[lay.oOff] = r.get(lay.off);
    o[lay.oRec] = r.get(lay.rec);
    return RowFactory.create(o);
  }

  /** A source partition's statistics from a map task: rows, max event time, delay histogram. */
  Row statsRow(Row r, long watermark) {
    Object[] o = new Object[lay.oWidth];
    o[0] = Contract.PARTITION_STATS;
    o[lay.oPart] = r.get(lay.part);
    o[lay.oStatMax] = r.get(lay.tmax);
    o[lay.oStatRows] = r.get(lay.n);
    byte[] delays = (byte[]) r.get(lay.p0);
    o[lay.oStatDelays] = delays == null ? null : new String(delays, java.nio.charset.StandardCharsets.UTF_8);
    o[lay.oWatermark] = watermark;
    return RowFactory.create(o);
  }
}
