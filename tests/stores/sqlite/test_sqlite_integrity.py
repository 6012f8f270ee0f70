"""What a sqlite store reads back is what was written, whatever a caller passed and whatever
happened to the file's derived parts: lone surrogates in a job or an imported decision, times
that are not finite, a damaged index snapshot, an entry row no key points to, a damaged page.
Real files, reopened."""

from __future__ import annotations

import math
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nearduppipe import StoreError, open_store
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import Decision, Entry
from nearduppipe.stores.sqlite.snapshot import SNAPSHOT_TABLE

A = 0x0123_4567_89AB_CDEF


def _pages(n: int, seed: int = 3) -> list[Fingerprints]:
    rng = random.Random(seed)
    return [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(n)]


def test_lone_surrogates_in_a_job_or_a_decision_block_nothing(tmp_path: Path) -> None:
    """A job id or an imported decision's keys that UTF-8 cannot encode used to make every
    later commit fail (and close() lose the buffered writes of other pages)."""
    path = tmp_path / "s.sqlite"
    pages = _pages(12)
    with open_store(str(path), commit_every=2) as s:
        for i, fps in enumerate(pages[:5]):
            assert s.check(fps, f"k{i}", job="job").status == "new"
        assert s.check(pages[5], "bad", job="\ud800").status == "new"
        s.add(pages[6], "added", job="x\udc80y")
        s.import_records([], [Decision("\udc80", A, "x\ud800", A ^ 1, 1, 1.7e9, "t\ud800", 3)])
        for i, fps in enumerate(pages[7:], start=7):
            assert s.check(fps, f"k{i}").status == "new"
    with open_store(str(path), read_only=True) as r:
        entries = {e.key: e for e in r.entries()}
        assert len(entries) == 12 and entries["bad"].job == "\ufffd"
        assert entries["added"].job == "x\ufffdy"
        (d,) = r.decisions()
        assert (d.key, d.matched_key, d.text) == ("\ufffd", "x\ufffd", "t\ufffd")


@pytest.mark.parametrize("t", [math.nan, math.inf, -math.inf, "soon"])
def test_a_time_that_is_not_a_finite_number_is_refused_before_anything_is_written(
    tmp_path: Path, t: object
) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.add(A, "a")
        with pytest.raises(ValueError, match="stored_at must be a"):
            s.add(A ^ 1, "b", stored_at=t)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="stored_at must be a"):
            s.import_records([Entry("c", A ^ 2, t, None)], [])  # type: ignore[arg-type]
    with open_store(str(path), read_only=True) as r:
        assert [e.key for e in r.entries()] == ["a"]


def _results(path: Path, probes: list[Fingerprints]) -> list[object]:
    with open_store(str(path), read_only=True) as r:
        found = [[(m.key, m.distance, m.wide_distance) for m in r.near(p)] for p in probes]
        return [found, sorted((e.key, e.stored_at) for e in r.entries()), r.get("k7")]


def _flip(path: Path, name: str, at: int) -> None:
    conn = sqlite3.connect(str(path))
    (blob,) = conn.execute(
        f'SELECT value FROM "{SNAPSHOT_TABLE}" WHERE name = ? AND part = 0', (name,)
    ).fetchone()
    damaged = bytearray(blob)
    damaged[at % len(damaged)] ^= 0x10
    conn.execute(
        f'UPDATE "{SNAPSHOT_TABLE}" SET value = ? WHERE name = ? AND part = 0',
        (bytes(damaged), name),
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("column", ["fps", "wide", "has_wide", "times", "keys", "filter"])
def test_a_damaged_snapshot_is_not_used(tmp_path: Path, column: str) -> None:
    """One flipped bit in any blob of the index snapshot: the rows decide (same results as a
    store whose snapshot is gone); before, the flipped value was used as it was."""
    path = tmp_path / "s.sqlite"
    pages = _pages(300)
    with open_store(str(path)) as s:
        for i, fps in enumerate(pages):
            s.add(fps, f"k{i}", stored_at=1_795_459_199.93289 + i / 7)  # not 3 decimals
    probes = [Fingerprints(p.fp ^ 0b101, p.wide ^ 0b111) for p in pages[::10]]
    expected = _results(path, probes)
    assert all(found for found in expected[0])  # type: ignore[union-attr]
    _flip(path, column, 7 * 8 + 3)
    assert _results(path, probes) == expected
    conn = sqlite3.connect(str(path))
    conn.execute(f'DELETE FROM "{SNAPSHOT_TABLE}"')  # the rows alone: the same, times included
    conn.commit()
    conn.close()
    assert _results(path, probes) == expected


def test_an_entry_row_no_key_points_to_is_not_a_page(tmp_path: Path) -> None:
    """A rebuild from the rows read an ``i:`` row that no ``k:`` row points to as one more
    entry: the key listed twice, and a check of it judged against itself."""
    path = tmp_path / "s.sqlite"
    pages = _pages(20)
    with open_store(str(path)) as s:
        for i, fps in enumerate(pages):
            s.add(fps, f"k{i}")
    conn = sqlite3.connect(str(path))
    rows = conn.execute("SELECT key, value FROM neardup WHERE key >= 'i:' AND key < 'i;'")
    value = sorted(rows)[-1][1]
    conn.execute("INSERT INTO neardup (key, value) VALUES (?, ?)", ("i:7fffffffffff", value))
    conn.commit()
    conn.close()
    with open_store(str(path), read_only=True) as r:
        keys = [e.key for e in r.entries()]
        assert sorted(keys) == sorted(f"k{i}" for i in range(20)), keys
    with open_store(str(path)) as s:
        assert s.check(pages[-1], "k19").status == "unchanged"
        assert len(s) == 20


def test_a_damaged_page_is_a_store_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        for i, fps in enumerate(_pages(3000)):
            s.add(fps, f"https://example.com/{i}", text="t" * 200)
    conn = sqlite3.connect(str(path))  # (the snapshot stays: the open reads no middle row)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    data = bytearray(path.read_bytes())
    pages = len(data) // page_size
    mid = pages // 2 * page_size
    data[mid : mid + page_size] = random.Random(1).randbytes(page_size)
    path.write_bytes(bytes(data))
    with open_store(str(path), read_only=True) as r, pytest.raises(StoreError, match="damaged"):
        list(r.entries())  # a scan reaches the damaged page: sqlite3.DatabaseError before


@pytest.mark.parametrize("read_only", [True, False])
def test_a_fifo_or_a_device_is_named_not_called_missing(tmp_path: Path, read_only: bool) -> None:
    """A FIFO was "no such store file" (the file exists); opening one for writing could block
    on it. Each kind is named, and nothing is read from it or written beside it."""
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    for path, kind in [(fifo, "a FIFO"), (Path("/dev/null"), "a character device")]:
        with pytest.raises(StoreError, match=f"is {kind}.*not a store file"):
            open_store(str(path), read_only=read_only)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.sqlite"]


def test_the_commands_name_a_fifo_not_called_missing(tmp_path: Path) -> None:
    """The commands on a FIFO (each a child process: one that blocked on it would time out).
    (They were run under both parameters of the test above, which they do not read.)"""
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    for command in (["info"], ["report"], ["forget"]):
        out = subprocess.run(
            [sys.executable, "-m", "nearduppipe.cli", *command, str(fifo), *(["k"] if command == ["forget"] else [])],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 2 and out.stdout == "", command
        line = f"nearduppipe {command[0]}: {fifo}: is a FIFO (named pipe), not a store file"
        assert out.stderr.strip() == line
