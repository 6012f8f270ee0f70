"""dedup on real clusters on loopback: a Spark standalone master and worker (their own JVMs,
the executor's Python workers started by the worker), and a Dask scheduler and worker
processes (``--scheduler``). Their tasks start in folders of their own, not the command's:
inputs named relative to the command's folder (a glob, gzip, a WARC) must still be read, and
``-o``, ``--pairs`` and ``--report`` must be the local engine's bytes. Before, each cluster
said ``INPUT feeds/a.jsonl.gz: cannot read: No such file or directory``.

Slow (three JVMs; a scheduler and its workers): marked ``engine``, skipped where Java, PySpark
or distributed is missing. Every process listens on 127.0.0.1 only."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..batch.test_dedup_inputs import as_html, planted, write_jsonl, write_warc

pytestmark = pytest.mark.engine

LOOPBACK = "127.0.0.1"
READY_S = 180  # a JVM's start on 2 loaded cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def start(cmd: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # (its own process group: stopped with its children)
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True)  # fmt: skip


def wait_for(log: Path, text: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.5)
    pytest.fail(f"{log.name}: no {text!r} within {READY_S} s:\n{log.read_text()[-3000:]}")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """The command's folder: ``feeds/`` (two gzip feeds and a WARC) of planted groups."""
    pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
    here = tmp_path / "job"
    (here / "feeds").mkdir(parents=True)
    records = planted(groups=12, distinct=16)
    third = len(records) // 3
    write_jsonl(here / "feeds" / "a.jsonl.gz", records[:third])
    write_jsonl(here / "feeds" / "b.jsonl.gz", records[third : 2 * third])
    write_warc(here / "feeds" / "c.warc.gz", [as_html(r) for r in records[2 * third :]])
    return here


def dedup(here: Path, env: dict[str, str], *engine: str) -> dict[str, bytes]:
    """``nearduppipe dedup`` run in ``here`` on the relative names; its three outputs."""
    outs = {"o": "kept.jsonl", "pairs": "pairs.jsonl", "report": "report.txt"}
    tag = engine[1] if engine else "local"
    names = {k: f"{tag}-{v}" for k, v in outs.items()}
    cmd = [sys.executable, "-m", "nearduppipe.cli", "dedup", "feeds/*.jsonl.gz",
           "feeds/c.warc.gz", *engine, "-o", names["o"], "--pairs", names["pairs"],
           "--report", names["report"]]  # fmt: skip
    done = subprocess.run(cmd, cwd=here, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {k: (here / v).read_bytes() for k, v in names.items()}


def loopback_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = LOOPBACK  # (Spark binds to the host's address otherwise)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[str]:
    """A standalone master and one worker of 2 cores, each in a folder of its own."""
    if shutil.which("java") is None:
        pytest.skip("a Spark cluster needs Java (17) on PATH: none found")
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("a Spark cluster needs PySpark: pip install 'nearduppipe[spark]'")
    import pyspark

    home = Path(pyspark.__file__).parent
    env = loopback_env()
    env["SPARK_HOME"] = str(home)
    spark_class = str(home / "bin" / "spark-class")
    port = free_port()
    master = f"spark://{LOOPBACK}:{port}"
    (tmp_path / "master").mkdir()
    (tmp_path / "worker").mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
             "--port", str(port), "--webui-port", str(free_port())],
            tmp_path / "master.log", tmp_path / "master", env,
        ))  # fmt: skip
        wait_for(tmp_path / "master.log", "I have been elected leader", procs)
        procs.append(start(
            [spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", LOOPBACK,
             "--cores", "2", "--memory", "2g", "--webui-port", str(free_port()),
             "--work-dir", str(tmp_path / "worker" / "apps")],
            tmp_path / "worker.log", tmp_path / "worker", env,
        ))  # fmt: skip
        wait_for(tmp_path / "worker.log", "Successfully registered with master", procs)
        yield master
    finally:
        stop(procs)


@pytest.fixture
def dask_scheduler(tmp_path: Path) -> Iterator[str]:
    """A scheduler and 2 worker processes of one thread (``dask worker``), in a folder of
    their own."""
    for module in ("distributed", "pandas"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"a Dask cluster needs {module}: pip install 'nearduppipe[dask]'")
    port = free_port()
    address = f"tcp://{LOOPBACK}:{port}"
    folder = tmp_path / "dask"
    folder.mkdir()
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    worker = [sys.executable, "-m", "distributed.cli.dask_worker"]
    procs: list[subprocess.Popen[bytes]] = []
    env = dict(os.environ)
    try:
        procs.append(start(
            [*dask, "--host", LOOPBACK, "--port", str(port), "--dashboard-address",
             f"{LOOPBACK}:0"], tmp_path / "scheduler.log", folder, env,
        ))  # fmt: skip
        wait_for(tmp_path / "scheduler.log", "Scheduler at:", procs)
        procs.append(start(
            [*worker, address, "--nworkers", "2", "--nthreads", "1", "--host", LOOPBACK,
             "--dashboard-address", f"{LOOPBACK}:0"], tmp_path / "workers.log", folder, env,
        ))  # fmt: skip
        wait_for(tmp_path / "workers.log", "Registered to", procs)
        yield address
    finally:
        stop(procs)


def test_a_spark_standalone_cluster_reads_relative_names_and_writes_the_local_bytes(
    inputs: Path, spark_cluster: str
) -> None:
    env = loopback_env()
    local = dedup(inputs, env)
    assert local["pairs"] and b"kept" in local["report"]  # (planted pairs were found)
    assert dedup(inputs, env, "--engine", "spark", "--master", spark_cluster) == local


def test_a_dask_scheduler_reads_relative_names_and_writes_the_local_bytes(
    inputs: Path, dask_scheduler: str
) -> None:
    env = dict(os.environ)
    local = dedup(inputs, env)
    assert local["pairs"]
    assert dedup(inputs, env, "--engine", "dask", "--scheduler", dask_scheduler) == local
