/*
 * Runs real Apache Flink 2.3 event-time session windows (EventTimeSessionWindows with its default
 * EventTimeTrigger, allowedLateness, sideOutputLateData) on small "micro-batch" scenarios, with
 * the watermark set exactly at the end of each batch, so tests can compare Flink with our model.
 *
 *   java -Dlog4j.configurationFile=log4j2.properties -cp 'DEST/lib/*:CLASSES' \
 *        FlinkSessions [--separate] IN.json OUT.json
 *
 * IN.json is one scenario object or a JSON array of them; OUT.json gets one result object or an
 * array of results in the same order. Scenario (fields not listed here are ignored):
 *   {"window": {"type": "session", "gap_ms": G}, "max_out_of_orderness_ms": B,
 *    "allowed_lateness_ms": L,
 *    "batches": [[{"key": "a", "ts": 100, "value": 1}, {"ts": 130, "heartbeat": true}], ...]}
 * Result:
 *   {"firings": [{"batch", "key", "window_start", "window_end", "count", "sum", "watermark_ms",
 *                 "cause"}],
 *    "late":    [{"batch", "key", "ts", "value"}]}
 *
 * HOW FLINK IS DRIVEN (parallelism 1, streaming mode)
 *  - Batches in order. Within batch i the keyed records are fed in DESCENDING ts order (ties: input
 *    order). Flink decides merges and lateness record by record, our model per batch; with the
 *    newest record first, each later (older) record of the batch meets a session set that already
 *    holds every newer record of the batch, which makes Flink's decisions equal to batch-level ones.
 *  - After the records of batch i a marker element carries the watermark
 *        W_i = max(W_{i-1}, max(0, M_i - B)),  M_i = max ts of records and heartbeats in 0..i
 *    (no watermark until some batch has had a ts). The WatermarkGenerator emits a watermark only on
 *    markers (onPeriodicEmit does nothing; auto-watermark interval 0); markers are dropped by a
 *    filter before keyBy, the watermark they caused flows on. Heartbeats never enter the stream:
 *    they only count in M_i. Before the first watermark Flink's watermark is Long.MIN_VALUE
 *    (nothing is late). At the end of input Flink emits Long.MAX_VALUE, which fires every
 *    remaining session: reported as batch = number of batches (the "end" batch), watermark_ms =
 *    9223372036854775807 (Long.MAX_VALUE, not mapped), cause "timer".
 *  - Boundary mapping: our model merges two sessions only when their half-open intervals
 *    [ts, ts + gap) strictly overlap (records closer than gap), but Flink's TimeWindow.intersects
 *    also merges touching windows (a.end == b.start). So Flink runs on doubled time:
 *        ts' = 2 ts,  gap' = 2 gap - 1,  allowedLateness' = 2 L,  watermark' = 2 W.
 *    Windows [2a, 2a+2g-1) and [2b, 2b+2g-1), a < b, intersect iff 2b <= 2a+2g-1 iff b - a < g,
 *    exactly when ours overlap. Everything Flink compares with a watermark (ts' + L', window
 *    maxTimestamp' + L' with maxTimestamp' = end' - 1 = 2 (end - 1)) is even, like the watermarks,
 *    so every "<=" decision is the undoubled one. Mapped back:
 *        start = start' / 2,  end = (end' + 1) / 2,  ts = ts' / 2,  watermark = watermark' / 2.
 *  - Window function: accumulating (the default trigger never purges); a firing reports key, session
 *    bounds, count and sum of all records in the session, context.currentWatermark() (mapped back;
 *    Long.MIN_VALUE -> null) and m = the largest batch index among the session's records.
 *  - Batch index and cause of a firing, exactly, from its watermark w and m:
 *      * a "timer" firing happens while the watermark advances at the end of batch i: w = W_i, and
 *        i is the FIRST batch with W_i = w (a watermark that does not advance is not emitted and
 *        fires nothing); its records all arrived in batches <= i, so m <= i.
 *      * an "element" firing happens when a record of batch j joins a session whose maxTimestamp is
 *        <= the watermark (EventTimeTrigger.onElement fires at once). The session then holds that
 *        record and nothing newer, so m = j, while w = W_{j-1}, whose first batch is <= j-1 < m.
 *    So with i = first batch having W_i = w: m <= i -> ("timer", i), else ("element", m). Each late
 *    element that joins a live session fires it again, so one batch can hold several element
 *    firings of a session (with growing counts).
 *  - Late records (Flink's side output: every window the record falls into is late, and
 *    ts' + L' <= watermark'): key, ts, value and the batch of the record (carried in the record).
 *  Output lists are sorted (firings by batch, key, window_start, window_end, count, sum, cause; late
 *  by batch, key, ts, value), so the order of emission inside a batch does not matter.
 *
 * MANY SCENARIOS IN ONE JOB (default for an array; --separate runs one Flink job per scenario,
 * ~1.5 s each, as the plain reference). A job start costs far more than the scenarios, so scenario
 * s runs in the same job on its own keys ("s:key") and its own disjoint stretch of (doubled) time:
 * t'' = base_s + 2 t. Session windows of different keys interact only through the shared
 * watermark, and the watermark sequence each scenario sees is equivalent to running alone:
 *  - before its first watermark the watermark is E_{s-1} (the previous scenario's end), which is
 *    below every shifted time of scenario s (base_s = E_{s-1} + 2 - 2 min(0, min ts)), so every
 *    comparison comes out as with Long.MIN_VALUE;
 *  - then base_s + 2 W_i exactly when W_i would be emitted alone (W_i >= 0 keeps them increasing);
 *  - a last marker E_s = base_s + 2 (max(0, max ts) + gap + L + 1) plays the end-of-input watermark:
 *    it exceeds every window cleanup time of s, so it fires and clears every remaining session of s
 *    (those firings are reported as the end batch, like Long.MAX_VALUE), and it exceeds every W_i.
 * Gap and allowed lateness are properties of the window operator: the job has one filter ->
 * keyBy -> window branch per distinct (gap, lateness) behind the one source, and every branch sees
 * every watermark. If the shifted times would overflow a long, the scenarios run separately.
 */

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public class FlinkSessions {

    /** A stream element: a keyed record, or (marker = true) a watermark carrier (in ts). */
    public static class Ev {
        public int scen;
        public String key;
        public long ts;
        public long value;
        public int batch;
        public int group; // index of its (gap, lateness) branch in a shared job
        public boolean marker;

        public Ev() {}

        static Ev record(int scen, String key, long ts, long value, int batch) {
            Ev e = new Ev();
            e.scen = scen;
            e.key = key;
            e.ts = ts;
            e.value = value;
            e.batch = batch;
            return e;
        }

        static Ev marker(long watermark) {
            Ev e = new Ev();
            e.key = "";
            e.ts = watermark;
            e.marker = true;
            return e;
        }
    }

    /** What the job emits: a firing (late = false) or a side-output record (late = true). */
    public static class Out {
        public boolean late;
        public int scen;
        public String key;
        public long start; // firing: window start (shifted, doubled)
        public long end; // firing: window end (shifted, doubled)
        public long count;
        public long sum;
        public long watermark; // firing: context.currentWatermark() (shifted, doubled)
        public int batch; // firing: max batch of its records; late: the record's batch
        public long ts; // late: record ts (shifted, doubled)
        public long value; // late: record value

        public Out() {}
    }

    /** Emits a watermark only when a marker passes; never periodically. */
    public static class MarkerWatermarks implements WatermarkGenerator<Ev> {
        @Override
        public void onEvent(Ev e, long eventTimestamp, WatermarkOutput out) {
            if (e.marker) {
                out.emitWatermark(new Watermark(e.ts));
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {}
    }

    public static class ByScenarioAndKey implements KeySelector<Ev, String> {
        @Override
        public String getKey(Ev e) {
            return e.scen + ":" + e.key; // the digits before the first ':' make it unambiguous
        }
    }

    public static class Report extends ProcessWindowFunction<Ev, Out, String, TimeWindow> {
        @Override
        public void process(String k, Context ctx, Iterable<Ev> records, Collector<Out> out) {
            Out o = new Out();
            o.batch = -1;
            for (Ev e : records) {
                o.scen = e.scen;
                o.key = e.key;
                o.count++;
                o.sum += e.value;
                o.batch = Math.max(o.batch, e.batch);
            }
            o.start = ctx.window().getStart();
            o.end = ctx.window().getEnd();
            o.watermark = ctx.currentWatermark();
            out.collect(o);
        }
    }

    public static class LateRecord implements MapFunction<Ev, Out> {
        @Override
        public Out map(Ev e) {
            Out o = new Out();
            o.late = true;
            o.scen = e.scen;
            o.key = e.key;
            o.ts = e.ts;
            o.value = e.value;
            o.batch = e.batch;
            return o;
        }
    }

    static final ObjectMapper JSON = new ObjectMapper();

    /** One parsed scenario, in doubled but unshifted time. */
    static final class Plan {
        long gap; // original units
        long lateness; // original units
        int nBatches;
        long[] wm; // W_i (original units), Long.MIN_VALUE = none yet
        List<List<Ev>> batchRecords = new ArrayList<>(); // per batch, descending ts'
        long lo; // min(0, min ts)
        long hi; // max(0, max ts) + gap + lateness + 1: beyond every W_i and cleanup time
    }

    static long requireLong(JsonNode node, String field, String where) {
        JsonNode v = node == null ? null : node.get(field);
        if (v == null || !v.isIntegralNumber() || !v.canConvertToLong()) {
            throw new IllegalArgumentException(where + ": '" + field + "' must be an integer");
        }
        return v.asLong();
    }

    static long optLong(JsonNode node, String field, long dflt, String where) {
        JsonNode v = node.get(field);
        return (v == null || v.isNull()) ? dflt : requireLong(node, field, where);
    }

    static Plan plan(JsonNode sc, int index) {
        String where = "scenario " + index;
        JsonNode window = sc.get("window");
        if (window == null || !"session".equals(window.path("type").asText())) {
            throw new IllegalArgumentException(where + ": window.type must be \"session\"");
        }
        Plan p = new Plan();
        p.gap = requireLong(window, "gap_ms", where + ".window");
        long bound = optLong(sc, "max_out_of_orderness_ms", 0, where);
        p.lateness = optLong(sc, "allowed_lateness_ms", 0, where);
        if (p.gap < 1 || bound < 0 || p.lateness < 0) {
            throw new IllegalArgumentException(where + ": need gap_ms >= 1, "
                    + "max_out_of_orderness_ms >= 0 and allowed_lateness_ms >= 0");
        }
        JsonNode batches = sc.get("batches");
        if (batches == null || !batches.isArray()) {
            throw new IllegalArgumentException(where + ": 'batches' must be a list");
        }
        p.nBatches = batches.size();
        p.wm = new long[p.nBatches];
        long maxTs = Long.MIN_VALUE;
        long minTs = 0;
        long w = Long.MIN_VALUE;
        for (int i = 0; i < p.nBatches; i++) {
            JsonNode batch = batches.get(i);
            String bw = where + " batch " + i;
            if (!batch.isArray()) {
                throw new IllegalArgumentException(bw + " must be a list");
            }
            List<Ev> records = new ArrayList<>();
            for (JsonNode r : batch) {
                long ts = requireLong(r, "ts", bw);
                maxTs = Math.max(maxTs, ts);
                minTs = Math.min(minTs, ts);
                if (r.path("heartbeat").asBoolean(false)) {
                    continue;
                }
                JsonNode key = r.get("key");
                if (key == null || !key.isTextual()) {
                    throw new IllegalArgumentException(bw + ": record without a string 'key'");
                }
                records.add(Ev.record(index, key.asText(), Math.multiplyExact(2L, ts),
                        requireLong(r, "value", bw), i));
            }
            // Descending ts, stable for ties (List.sort is stable): see the header comment.
            records.sort(Comparator.comparingLong((Ev e) -> e.ts).reversed());
            p.batchRecords.add(records);
            if (maxTs != Long.MIN_VALUE) {
                w = Math.max(w, Math.max(0L, Math.subtractExact(maxTs, bound)));
            }
            p.wm[i] = w;
        }
        p.lo = minTs;
        p.hi = Math.addExact(Math.addExact(Math.max(0L, maxTs), p.gap),
                Math.addExact(p.lateness, 1L));
        return p;
    }

    /** Keeps the records of one (gap, lateness) group; markers pass to every group. */
    public static class InGroup implements FilterFunction<Ev> {
        final int group;

        InGroup(int group) {
            this.group = group;
        }

        @Override
        public boolean filter(Ev e) {
            return !e.marker && e.group == group;
        }
    }

    /**
     * Runs one job for the given plans, shifted by bases[s]; ends[s] is the end-of-scenario marker
     * (Long.MAX_VALUE: none, the end of input plays it). Gap and allowed lateness belong to the
     * window operator, so scenarios are grouped by (gap, lateness), one keyBy/window branch per
     * group behind one source; the watermark reaches every branch. Returns the job's outputs.
     */
    static List<Out> runJob(List<Plan> plans, long[] bases, long[] ends) throws Exception {
        java.util.Map<List<Long>, Integer> groupOf = new java.util.LinkedHashMap<>();
        List<Ev> events = new ArrayList<>();
        for (int s = 0; s < plans.size(); s++) {
            Plan p = plans.get(s);
            int group = groupOf.computeIfAbsent(List.of(p.gap, p.lateness), k -> groupOf.size());
            for (int i = 0; i < p.nBatches; i++) {
                for (Ev e : p.batchRecords.get(i)) {
                    Ev shifted = Ev.record(e.scen, e.key, Math.addExact(bases[s], e.ts), e.value,
                            e.batch);
                    shifted.group = group;
                    events.add(shifted);
                }
                if (p.wm[i] != Long.MIN_VALUE) {
                    events.add(Ev.marker(bases[s] + 2 * p.wm[i]));
                }
            }
            if (ends[s] != Long.MAX_VALUE) {
                events.add(Ev.marker(ends[s]));
            }
        }

        if (events.isEmpty()) {
            return new ArrayList<>(); // no record, no watermark: nothing can fire (fromData needs one)
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1);
        env.setRuntimeMode(RuntimeExecutionMode.STREAMING);
        env.getConfig().setAutoWatermarkInterval(0);

        DataStream<Ev> stamped = env
                .fromData(events, Types.POJO(Ev.class))
                .assignTimestampsAndWatermarks(
                        WatermarkStrategy.<Ev>forGenerator(ctx -> new MarkerWatermarks())
                                .withTimestampAssigner((e, previous) -> e.ts));
        OutputTag<Ev> lateTag = new OutputTag<>("late", Types.POJO(Ev.class));
        List<DataStream<Out>> outputs = new ArrayList<>();
        for (java.util.Map.Entry<List<Long>, Integer> g : groupOf.entrySet()) {
            long gap = g.getKey().get(0);
            long lateness = g.getKey().get(1);
            SingleOutputStreamOperator<Out> fired = stamped
                    .filter(new InGroup(g.getValue()))
                    .keyBy(new ByScenarioAndKey(), Types.STRING)
                    .window(EventTimeSessionWindows.withGap(Duration.ofMillis(2 * gap - 1)))
                    .allowedLateness(Duration.ofMillis(2 * lateness))
                    .sideOutputLateData(lateTag)
                    .process(new Report(), Types.POJO(Out.class));
            outputs.add(fired);
            outputs.add(fired.getSideOutput(lateTag).map(new LateRecord(), Types.POJO(Out.class)));
        }
        DataStream<Out> all = outputs.get(0);
        if (outputs.size() > 1) {
            @SuppressWarnings("unchecked")
            DataStream<Out>[] rest = outputs.subList(1, outputs.size()).toArray(new DataStream[0]);
            all = all.union(rest);
        }
        List<Out> outs = new ArrayList<>();
        try (CloseableIterator<Out> it = all.executeAndCollect("flink-sessions")) {
            it.forEachRemaining(outs::add);
        }
        return outs;
    }

    /** Maps one scenario's outputs back to original time, batches and causes (see header). */
    static ObjectNode result(Plan p, List<Out> outs, long base, long end, int index) {
        List<ObjectNode> firings = new ArrayList<>();
        List<ObjectNode> late = new ArrayList<>();
        for (Out o : outs) {
            if (o.late) {
                ObjectNode n = JSON.createObjectNode();
                n.put("batch", o.batch);
                n.put("key", o.key);
                n.put("ts", (o.ts - base) / 2);
                n.put("value", o.value);
                late.add(n);
                continue;
            }
            int batch;
            String cause;
            Long w; // mapped watermark; null = none yet
            if (o.watermark == end || o.watermark == Long.MAX_VALUE) {
                batch = p.nBatches;
                cause = "timer";
                w = Long.MAX_VALUE;
            } else {
                // Below this scenario's first possible watermark (base_s + 0): none yet.
                w = o.watermark < base ? null : (o.watermark - base) / 2;
                int first = -1;
                for (int i = 0; w != null && i < p.nBatches; i++) {
                    if (p.wm[i] == w) {
                        first = i;
                        break;
                    }
                }
                if (first >= 0 && o.batch <= first) {
                    batch = first;
                    cause = "timer";
                } else {
                    batch = o.batch;
                    cause = "element";
                    long seen = batch == 0 ? Long.MIN_VALUE : p.wm[batch - 1];
                    Long seenW = seen == Long.MIN_VALUE ? null : seen;
                    if (batch < 0 || !java.util.Objects.equals(seenW, w)) {
                        throw new IllegalStateException("scenario " + index
                                + ": cannot place a firing of key " + o.key + " with watermark "
                                + w + " and max batch " + o.batch);
                    }
                }
            }
            ObjectNode n = JSON.createObjectNode();
            n.put("batch", batch);
            n.put("key", o.key);
            n.put("window_start", (o.start - base) / 2);
            n.put("window_end", (o.end - base + 1) / 2);
            n.put("count", o.count);
            n.put("sum", o.sum);
            if (w == null) {
                n.putNull("watermark_ms");
            } else {
                n.put("watermark_ms", w.longValue());
            }
            n.put("cause", cause);
            firings.add(n);
        }
        firings.sort(Comparator.comparingLong((ObjectNode n) -> n.get("batch").asLong())
                .thenComparing(n -> n.get("key").asText())
                .thenComparingLong(n -> n.get("window_start").asLong())
                .thenComparingLong(n -> n.get("window_end").asLong())
                .thenComparingLong(n -> n.get("count").asLong())
                .thenComparingLong(n -> n.get("sum").asLong())
                .thenComparing(n -> n.get("cause").asText()));
        late.sort(Comparator.comparingLong((ObjectNode n) -> n.get("batch").asLong())
                .thenComparing(n -> n.get("key").asText())
                .thenComparingLong(n -> n.get("ts").asLong())
                .thenComparingLong(n -> n.get("value").asLong()));
        ObjectNode r = JSON.createObjectNode();
        ArrayNode f = r.putArray("firings");
        firings.forEach(f::add);
        ArrayNode l = r.putArray("late");
        late.forEach(l::add);
        return r;
    }

    static List<Out> ofScenario(List<Out> outs, int index) {
        List<Out> mine = new ArrayList<>();
        for (Out o : outs) {
            if (o.scen == index) {
                mine.add(o);
            }
        }
        return mine;
    }

    /** One job per scenario, no shift, the real end-of-input Long.MAX_VALUE watermark. */
    static ObjectNode runSeparately(Plan p, int index) throws Exception {
        List<Out> outs = runJob(List.of(p), new long[] {0}, new long[] {Long.MAX_VALUE});
        return result(p, outs, 0, Long.MAX_VALUE, index);
    }

    static List<ObjectNode> runAll(List<Plan> plans, boolean separate) throws Exception {
        int n = plans.size();
        List<ObjectNode> results = new ArrayList<>();
        long[] bases = new long[n];
        long[] ends = new long[n];
        boolean shared = !separate && n > 1;
        try {
            long prevEnd = 0;
            for (int s = 0; shared && s < n; s++) {
                Plan p = plans.get(s);
                long start = s == 0 ? 0 : Math.addExact(prevEnd, 2);
                bases[s] = Math.subtractExact(start, Math.multiplyExact(2L, p.lo));
                ends[s] = Math.addExact(bases[s], Math.multiplyExact(2L, p.hi));
                prevEnd = ends[s];
            }
        } catch (ArithmeticException overflow) {
            shared = false;
        }
        if (!shared) {
            for (int s = 0; s < n; s++) {
                results.add(runSeparately(plans.get(s), s));
            }
            return results;
        }
        List<Out> outs = runJob(plans, bases, ends);
        for (int s = 0; s < n; s++) {
            results.add(result(plans.get(s), ofScenario(outs, s), bases[s], ends[s], s));
        }
        return results;
    }

    public static void main(String[] args) throws Exception {
        boolean separate = args.length == 3 && args[0].equals("--separate");
        if (args.length != 2 && !separate) {
            System.err.println("usage: FlinkSessions [--separate] IN.json OUT.json");
            System.exit(2);
        }
        JsonNode in = JSON.readTree(new File(args[args.length - 2]));
        List<JsonNode> scenarios = new ArrayList<>();
        if (in.isArray()) {
            in.forEach(scenarios::add);
        } else {
            scenarios.add(in);
        }
        List<Plan> plans = new ArrayList<>();
        for (int s = 0; s < scenarios.size(); s++) {
            plans.add(plan(scenarios.get(s), s));
        }
        List<ObjectNode> results = runAll(plans, separate);
        JsonNode out;
        if (in.isArray()) {
            ArrayNode a = JSON.createArrayNode();
            results.forEach(a::add);
            out = a;
        } else {
            out = results.get(0);
        }
        JSON.writerWithDefaultPrettyPrinter().writeValue(new File(args[args.length - 1]), out);
    }
}
