"""Outputs that are not regular files: a FIFO, a character device, a symlink such as
/dev/stdout. They are written through, in place, as a shell's ``>`` does; only a regular file or
a new path is replaced atomically (a temporary file renamed over it). Before the fix, root
replaced them with a regular file (once /dev/full itself). The devices here are nodes made in a
temporary folder with the numbers of /dev/null (1, 3) and /dev/full (1, 7): the machine's own
/dev is never touched. Real processes, real FIFOs, real device nodes."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nearduppipe import open_store

from ..support.cli import ROOT

A = 0x0123_4567_89AB_CDEF
WORDS = "harbour river council budget school library market station bridge festival".split()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "nearduppipe.cli", *args]


def run_reading(fifo: Path, argv: list[str], cwd: Path = ROOT) -> tuple[int, str, str]:
    """Run ``argv`` while this process reads ``fifo``: (exit status, what the FIFO received,
    stderr). The FIFO is opened first, non-blocking, so a command that never opens it (it
    replaced it with a file) cannot hang the test."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got = b""
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    break  # the writer closed it
                got += data
            elif proc.poll() is not None and not got:
                break  # it ended without ever opening the FIFO
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    finally:
        os.close(fd)
    return code, got.decode(), err


def device(path: Path, minor: int) -> Path:
    """A character device node with /dev/null's (minor 3) or /dev/full's (7) numbers."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD (root)")
    return path


def is_char_device(path: Path, minor: int) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, minor)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.check_and_add(A, "https://a.example/1")
        s.check_and_add(A ^ 0b11, "https://a.example/2")  # (no wide fingerprints: dropped)
    return path


def no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_report_into_a_fifo_and_devices(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    fifo = out / "fifo"
    os.mkfifo(fifo)
    code, got, err = run_reading(
        fifo, cli("report", str(store), "--format", "json", "-o", str(fifo))
    )
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert json.loads(got)["clusters"][0]["duplicates"][0]["key"] == "https://a.example/2"

    null = device(out / "null", 3)
    proc = subprocess.run(cli("report", str(store), "-o", str(null)), capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert is_char_device(null, 3), "the device node was replaced by a regular file"

    full = device(out / "full", 7)  # every write fails with ENOSPC: one line, status 2
    proc = subprocess.run(
        cli("report", str(store), "-o", str(full)), capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "No space left on device" in proc.stderr and str(full) in proc.stderr, proc.stderr
    assert is_char_device(full, 7), "the device node was replaced by a regular file"
    no_leftovers(out)


def test_a_symlink_is_written_through_as_dev_stdout_is(tmp_path: Path, store: Path) -> None:
    """/dev/stdout is a symlink to /proc/self/fd/1: the same here, in a temporary folder."""
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    proc = subprocess.run(
        cli("report", str(store), "--format", "json", "-o", str(stdout)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert stdout.is_symlink(), "the symlink was replaced by a regular file"
    assert json.loads(proc.stdout)["schema"] == "nearduppipe.report/1"
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    proc = subprocess.run(cli("report", str(store), "-o", str(link)), capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and "a.example" in real.read_text()
    no_leftovers(tmp_path)


def test_dedup_and_scrapy_neardup_write_into_a_fifo_and_a_device(
    tmp_path: Path, store: Path
) -> None:
    text = " ".join(f"{WORDS[i % len(WORDS)]}{i}" for i in range(80))
    feed = tmp_path / "feed.jsonl"
    rows = [{"url": f"https://e/{i}", "text": text + (" extra" if i else "")} for i in range(3)]
    feed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    null = device(tmp_path / "null", 3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    argv = cli("dedup", str(feed), "-o", str(null), "--output-format", "jsonl", "--quiet")
    code, got, err = run_reading(fifo, [*argv, "--format", "json", "--report", str(fifo)])
    assert code == 0, err
    assert is_char_device(null, 3) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(json.loads(got)["clusters"][0]["duplicates"]) == 2
    full = device(tmp_path / "full", 7)  # the kept records cannot be written: said so, not INPUT
    argv = cli("dedup", str(feed), "-o", str(full), "--output-format", "jsonl", "--quiet")
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{full}: cannot write there: No space left" in proc.stderr, proc.stderr
    assert is_char_device(full, 7)

    scrapy = [sys.executable, "-m", "scrapy", "neardup", "--store", str(store)]
    code, got, err = run_reading(fifo, [*scrapy, "--format", "json", "-o", str(fifo)])
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert json.loads(got)["schema"] == "nearduppipe.report/1"
    no_leftovers(tmp_path)
