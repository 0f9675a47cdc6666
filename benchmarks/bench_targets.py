"""Benchmark: every performance target of the project in one command, each printed as met or not.

Runs, one after the other (nothing else should run on the machine meanwhile):

1. ``bench_windowing.py --suites throughput,tiny --workloads T,S,SE,PT``: tumbling (T), sliding
   (S), sessions (SE) and per-partition watermarks (PT) against Spark's native aggregation, the
   passthrough floor and Apache Flink SQL, engines alternating in one session; then 1 k-row
   batches;
2. ``bench_windowing.py --suites scale`` at 10 M keys, daily UTC+8 windows, 100 batches of
   100 k rows, with Spark's default block cache (what a user starts with: eventtime says what to
   set when the state outgrows it), in a process of its own;
3. ``bench_kafka.py`` (pyspark 4.2: Spark's Kafka source on Maven Central stops there): T read
   from a 4-partition Kafka topic on a local broker.

Then prints one line per target: what was measured (min / median ratios where the target is a
ratio) and whether it is met. About 40 minutes on the 2-core machine of docs/performance.md:

    .venv/bin/python benchmarks/bench_targets.py
    .venv/bin/python benchmarks/bench_targets.py --quick     # the same steps on small inputs (~8 min), a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _run(argv: list[str], env: dict | None = None) -> int:
    print("$ " + " ".join(argv), flush=True)
    return subprocess.call(argv, cwd=ROOT, env={**os.environ, **(env or {})})


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def targets(r: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met: True / False / None when not measured)."""
    out: list[tuple[str, str, bool | None]] = []

    def ratio(name: str, label: str, limit: float, key_min: str = "ratio_min", key_med: str = "ratio_median") -> None:
        w = r.get(name)
        if not w or key_min not in w:
            out.append((label, "not measured", None))
            return
        out.append((label, f"{w[key_min]:.2f} / {w[key_med]:.2f} (min / median)", w[key_min] <= limit and w[key_med] <= limit))

    ratio("T", "T tumbling <= 0.8x native", 0.8)
    t = r.get("T")
    out.append(("T <= 2.5x the passthrough floor",
                f"{t['floor_x']:.2f}x (native {t['native_floor_x']:.2f}x; medians)" if t else "not measured",
                t["floor_x"] <= 2.5 if t else None))
    ratio("S", "S sliding <= 0.4x native", 0.4)
    ratio("SE", "sessions <= 1.0x native session_window", 1.0)
    ratio("PT", "per-partition watermarks <= 1.1x the global mode", 1.1, "global_ratio_min", "global_ratio_median")
    ratio("PT", "per-partition watermarks <= 1.0x native", 1.0)
    ratio("kafka", "Kafka-fed T <= 1.0x native", 1.0)
    sc = r.get("scale")
    if sc:
        out.append((f"scale ({sc['keys']:,} keys, {sc['batches']} batches, block cache {sc['block_cache_mb']}): "
                    "checkpoint bytes per batch <= 1.2x native",
                    f"{sc['checkpoint_ratio']:.2f}x ({sc['eventtime_checkpoint_per_batch']:,.0f} against "
                    f"{sc['native_checkpoint_per_batch']:,.0f})", sc["checkpoint_ratio"] <= 1.2))
        out.append(("scale: last 10 / first 10 batch time <= 1.2",
                    f"{sc['eventtime_last_first']:.2f} (native {sc['native_last_first']:.2f}); wall "
                    f"{sc['eventtime_wall_s']:.0f} s against {sc['native_wall_s']:.0f} s", sc["eventtime_last_first"] <= 1.2))
    else:
        out.append(("scale", "not measured", None))
    tiny = r.get("tiny")
    out.append(("tiny batches: median batch time <= 1.0x native",
                f"{tiny['ratio_min']:.2f} / {tiny['ratio_median']:.2f} (min / median of the runs' median batch times; "
                f"{tiny['eventtime_ms']:.0f} against {tiny['native_ms']:.0f} ms{_tiny_parts(tiny)})" if tiny else "not measured",
                tiny["ratio_min"] <= 1.0 and tiny["ratio_median"] <= 1.0 if tiny else None))
    for name in ("T", "S", "SE"):
        w = r.get(name) or {}
        if "flink_ratio" not in w:
            out.append((f"{name}: faster than Flink SQL", "not measured", None))
            continue
        out.append((f"{name}: faster than Flink SQL (net of its fixed cost)",
                    f"{w['flink_net_ratio']:.2f} of its time ({w['flink_ratio']:.2f} with its JVM start-up)",
                    w["flink_net_ratio"] < 1.0))
    return out


def _tiny_parts(tiny: dict) -> str:
    """Where the tiny batches' time goes, eventtime against native: "; state stage 45 against 26 ms, ..."."""
    parts = tiny.get("breakdown_ms") or {}
    e, n = parts.get("eventtime") or {}, parts.get("native") or {}
    shown = [f"{name.replace('_', ' ')} {e[k]:.0f} against {n[k]:.0f}"
             for k, name in (("planning_ms", "planning"), ("map_stage_ms", "map stage"), ("state_stage_ms", "state stage"))
             if e.get(k) is not None and n.get(k) is not None]
    return "; " + ", ".join(shown) + " ms" if shown else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs and one round: checks the steps, measures nothing")
    parser.add_argument("--repeat", type=int, default=5,
                        help="alternating runs per engine and workload (bench_windowing.py's default; with 3, the "
                             "per-partition line's median ratio read 1.02 to 1.21 in four runs of nearly the same code)")
    parser.add_argument("--kafka-python", default=os.path.join(ROOT, ".venv-spark4.2", "bin", "python"),
                        help="the pyspark 4.2 interpreter for the Kafka step (made by `make install`)")
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="eventtime-targets-")
    files = {step: os.path.join(work, f"{step}.json") for step in ("throughput", "scale", "kafka")}
    bench = os.path.join(HERE, "bench_windowing.py")
    small = ["--rows", "200000"] if args.quick else []
    repeat = ["--repeat", "1" if args.quick else str(args.repeat), "--warmup", "0" if args.quick else "1"]
    _run([sys.executable, bench, "--suites", "throughput,tiny", "--workloads", "T,S,SE,PT", *small, *repeat,
          "--json", files["throughput"]], {"PYSPARK_PYTHON": sys.executable})
    scale = (["--scale-keys", "200000", "--scale-batches", "20", "--scale-batch-rows", "10000"] if args.quick
             else ["--scale-keys", "10000000", "--scale-batches", "100", "--scale-batch-rows", "100000"])
    _run([sys.executable, bench, "--suites", "scale", *scale, "--scale-block-cache-mb", "default", "--json", files["scale"]],
         {"PYSPARK_PYTHON": sys.executable})
    if os.path.exists(args.kafka_python):
        _run([args.kafka_python, os.path.join(HERE, "bench_kafka.py"), *small, *repeat, "--json", files["kafka"]],
             {"PYSPARK_PYTHON": args.kafka_python})
    else:
        print(f"Kafka step left out: no pyspark 4.2 interpreter at {args.kafka_python} (make install makes it)")

    results = {}
    for path in files.values():
        results.update(_load(path))
    print()
    print("target | measured | status")
    for label, measured, met in targets(results):
        print(f"{label} | {measured} | {'met' if met else 'NOT MET' if met is False else 'not measured'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
