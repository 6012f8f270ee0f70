"""The Spark engine (``dedup --engine spark``, extra ``nearduppipe[spark]``): the shared core
on a Spark cluster, ``local[N]`` or a real one (``spark-submit``: docs/batch.md).

- fingerprint map: one task per split of each input (:func:`.split_task.read_split`), run
  by the executors with nearduppipe's own code, so the inputs must be readable under the same
  name on every executor (a URL, a shared file system);
- join: up to ``broadcast_bytes`` of representatives (default 1 GiB: 14 M with their 512-bit
  words, 119 M without), their arrays broadcast and one task per slice of rows running the
  local engine's exact search for its rows (:mod:`.sliced`); beyond, a DataFrame of them,
  exploded under every table's key (``mapInPandas``), shuffled by ``(table, key)``
  (``repartition``) and joined in each partition with the 512-bit verdict (``mapInPandas``:
  :func:`.engine_frames.pairs_frame`); only the near pairs come back to the driver, which
  groups them and applies the keep rule;
- output: one task per split again (:func:`.write_task.write_split`), whose part of ``-o``
  the driver writes in input order.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from .compression import MissingExtraError
from .core import Fields, join_tables, sort_pairs
from .engine_frames import (
    PAIR_COLUMNS,
    FrameSearch,
    explode_frame,
    pairs_frame,
    shuffle_partitions,
)
from .sliced import BROADCAST_BYTES, frame_arrays, slice_pairs
from .split_task import SplitResult, Wants, read_split
from .splits import Split
from .write_task import WriteResult, WriteTask, write_split

__all__ = ["SparkEngine"]


def _need_pyspark() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise MissingExtraError(
            "--engine spark needs PySpark: pip install 'nearduppipe[spark]' (and Java 17)"
        ) from None
    return pyspark.sql


def _schema(columns: list[str], types: dict[str, str]) -> str:
    return ", ".join(f"{c} {types.get(c, 'long')}" for c in columns)


# A local[N] JVM this engine starts only hands tasks and their results to and fro: its JIT's
# second tier (C2) took 3-5 s of CPU of the 2 cores the tasks need at 1 M carried records, for
# no gain measured (docs/batch.md). A conf naming spark.driver.extraJavaOptions replaces it.
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


class SparkEngine(FrameSearch):
    """``master``: a Spark master URL (``local[2]``, ``spark://host:7077``, ``yarn``), or None
    to take the session ``spark-submit`` made. ``partitions``: of the shuffle (default: twice
    the default parallelism, more for large joins: :func:`.engine_frames.shuffle_partitions`).
    ``conf``: more Spark settings (``spark.driver.memory`` for a large ``local`` join; a
    ``local`` JVM the engine starts gets :data:`LOCAL_JVM_OPTIONS` unless it names
    ``spark.driver.extraJavaOptions``)."""

    name = "spark"

    def __init__(
        self,
        master: str | None = "local[2]",
        partitions: int | None = None,
        blocks: int | None = None,
        conf: dict[str, str] | None = None,
        broadcast_bytes: int = BROADCAST_BYTES,
    ) -> None:
        sql = _need_pyspark()
        local = master.startswith("local") if master else "PYSPARK_GATEWAY_PORT" not in os.environ
        if local:  # (not under spark-submit, whose conf names the executors' Python)
            # the executors' Python is this one, where nearduppipe is installed
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        pyspark: Any = importlib.import_module("pyspark")
        self.storage = pyspark.StorageLevel
        # (the JVM is ours to end at close unless a session exists: spark-submit's, a user's)
        self.own_jvm = pyspark.SparkContext._gateway is None
        builder = sql.SparkSession.builder.appName("nearduppipe dedup")
        if master is not None:
            builder = builder.master(master)
        builder = builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
        builder = builder.config("spark.ui.enabled", "false")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        conf = dict(conf or {})
        if self.own_jvm and master is not None and master.startswith("local"):
            conf.setdefault("spark.driver.extraJavaOptions", LOCAL_JVM_OPTIONS)
        for name, value in conf.items():  # (spark.driver.memory: before the JVM)
            builder = builder.config(name, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.parallelism = int(self.spark.sparkContext.defaultParallelism)
        self.partitions = partitions  # None: by the join's size (shuffle_partitions)
        self.blocks = blocks
        self.broadcast_bytes = broadcast_bytes  # larger joins shuffle (0: always)
        # (local[N]: the executors write -o's parts to files the driver reads, .write_task)
        self.shares_files = str(self.spark.sparkContext.master).startswith("local")

    @property
    def cores(self) -> int:
        return self.parallelism

    def read(
        self, splits: list[Split], fields: Fields, params: FingerprintParams, wants: Wants
    ) -> Iterator[SplitResult]:
        def run(split: Split) -> list[SplitResult]:
            return [read_split(split, fields, params, wants)]

        yield from self._map(run, splits)

    def write(self, tasks: list[WriteTask]) -> Iterator[WriteResult]:
        def run(task: WriteTask) -> list[WriteResult]:
            return [write_split(task)]

        yield from self._map(run, tasks)

    def _map(self, run: Any, items: list[Any]) -> Iterator[Any]:
        if not items:
            return
        # one partition per split, computed at once and kept on the executors, then read back
        # partition by partition: the driver holds one split's results at a time
        rdd = self.spark.sparkContext.parallelize(items, len(items)).flatMap(run)
        rdd.persist(self.storage.MEMORY_AND_DISK)
        try:
            rdd.count()
            yield from rdd.toLocalIterator()
        finally:
            rdd.unpersist()

    def _join(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        size = int(frame.memory_usage(index=False).sum())
        if size <= self.broadcast_bytes:
            return self._sliced(frame, rule, split)
        return self._shuffled(frame, rule, split)

    def _sliced(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        """The frame's arrays broadcast, one task per slice of rows (:mod:`.sliced`)."""
        shared = self.spark.sparkContext.broadcast(frame_arrays(frame))
        rows = len(frame) if split is None else len(frame) - split
        parts = max(1, min(rows, 2 * self.parallelism))
        try:

            def run(part: int) -> list[np.ndarray]:
                return [slice_pairs(shared.value, rule, part, parts, split)]

            rdd = self.spark.sparkContext.parallelize(range(parts), parts)
            found = rdd.flatMap(run).collect()
        finally:
            shared.destroy()
        return sort_pairs(found)

    def _shuffled(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        tables = join_tables(rule.radius, self.blocks)
        # (createDataFrame slices the frame over the default parallelism already)
        df = self.spark.createDataFrame(frame)
        exploded_schema = _schema(["table", "key", *frame.columns], {"hw": "boolean"})

        def explode_batches(batches: Iterator[Any]) -> Iterator[Any]:
            for batch in batches:
                yield explode_frame(batch, tables)

        def pair_batches(batches: Iterator[Any]) -> Iterator[Any]:
            pd: Any = importlib.import_module("pandas")

            parts = list(batches)  # (one partition in several Arrow batches: whole groups)
            if parts:
                yield pairs_frame(pd.concat(parts, ignore_index=True), tables, rule, split)

        partitions = self.partitions or shuffle_partitions(
            len(frame) * len(tables), 2 * self.parallelism
        )
        exploded = df.mapInPandas(explode_batches, exploded_schema)
        shuffled = exploded.repartition(partitions, "table", "key")
        found = shuffled.mapInPandas(pair_batches, _schema(PAIR_COLUMNS, {})).toPandas()
        return sort_pairs([found[PAIR_COLUMNS].to_numpy(dtype=np.int64)])

    def close(self) -> None:
        """Stop the session and, when this engine started the JVM, the JVM too: PySpark
        keeps it (and its Python workers) until the interpreter exits otherwise."""
        self.spark.stop()
        if not self.own_jvm:
            return
        pyspark: Any = importlib.import_module("pyspark")
        gateway = pyspark.SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        pyspark.SparkContext._gateway = None
        pyspark.SparkContext._jvm = None
        if proc is not None:
            proc.stdin.close()  # (the JVM ends when its standard input closes)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
