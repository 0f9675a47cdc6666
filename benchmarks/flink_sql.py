"""Apache Flink SQL on the benchmark's rows: the peer outside Spark (bench_windowing.py).

The generated Parquet files are written again as CSV; ``flink/FlinkSqlWindows.java`` (window
table-valued functions, parallelism 2, a blackhole sink) is compiled against Flink 2.3's jars,
which ``scripts/flink-jars.sh`` takes from PyPI's ``apache-flink-libraries`` wheel, and each run
is one JVM: its wall time includes Flink's start-up, so the fixed cost (the same job over the
first 1,000 rows) is measured too.
"""

from __future__ import annotations

import glob
import os
import subprocess
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = HERE / "flink" / "FlinkSqlWindows.java"
LOG4J = REPO / "tests" / "flink" / "log4j2.properties"
FLINK_DIR = Path(os.environ.get("EVENTTIME_FLINK_DIR", REPO / ".flink"))


class FlinkSql:
    """Flink SQL runs over the CSV copy of a generated stream."""

    def __init__(self, work: str, parquet_dir: str) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        subprocess.run(["bash", str(REPO / "scripts" / "flink-jars.sh"), str(FLINK_DIR)], check=True, capture_output=True,
                       timeout=900)
        self.classpath = os.pathsep.join([str(FLINK_DIR / "lib" / "*"), str(FLINK_DIR / "sql" / "*")])
        self.classes = os.path.join(work, "flink-classes")
        os.makedirs(self.classes, exist_ok=True)
        subprocess.run(["javac", "-cp", self.classpath, "-d", self.classes, str(SOURCE)], check=True, capture_output=True,
                       timeout=300)
        self.csv, self.tiny = os.path.join(work, "flink-csv"), os.path.join(work, "flink-csv-1000")
        os.makedirs(self.csv, exist_ok=True)
        os.makedirs(self.tiny, exist_ok=True)
        options = pcsv.WriteOptions(include_header=False)
        files = sorted(glob.glob(os.path.join(parquet_dir, "*.parquet")))
        for path in files:
            pcsv.write_csv(pq.read_table(path), os.path.join(self.csv, Path(path).stem + ".csv"), options)
        first = pq.read_table(files[0])
        # the fixed cost: 1,000 rows and the flush row, the same job
        pcsv.write_csv(pa.concat_tables([first.slice(0, 1000), pq.read_table(files[-1])]),
                       os.path.join(self.tiny, "rows.csv"), options)

    def run(self, workload: str, tiny: bool = False) -> dict:
        """One job in a new JVM: ``wall_s`` (from the process start), ``job_s`` (as Flink times it)."""
        cmd = ["java", f"-Dlog4j.configurationFile={LOG4J}", "-cp", os.pathsep.join([self.classpath, self.classes]),
               "FlinkSqlWindows", self.tiny if tiny else self.csv, workload]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"Flink SQL failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
        job_ms = next(int(line[3:]) for line in proc.stdout.splitlines() if line.startswith("ms="))
        return {"wall_s": round(wall, 2), "job_s": round(job_ms / 1000, 2), "engine": "flink"}


def setup(work: str, parquet_dir: str) -> Optional[FlinkSql]:
    """A :class:`FlinkSql`, or None (said why) when Java or the jars are not there."""
    try:
        return FlinkSql(work, parquet_dir)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"Flink SQL left out: {exc} {detail.decode(errors='replace')[-500:] if isinstance(detail, bytes) else detail}",
              flush=True)
        return None
