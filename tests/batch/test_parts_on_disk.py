"""-o's parts on disk (batch/write_task.py, issue 44): where an engine's tasks share the driver's
file system (the local pool), each pass-2 task writes its part of ``-o`` to a file of a
temporary folder and the driver copies the files into ``-o`` in input order, a chunk at a time:
no process holds a part in memory, ``-o`` is byte for byte what parts held as text give, and
the folder is gone after the run, also when it fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.batch import splits as splits_module
from nearduppipe.batch import write_task
from nearduppipe.batch.compression import FeedError
from nearduppipe.batch.engine_local import LocalEngine
from nearduppipe.batch.records import dedup_records

from ..support.cli import ROOT
from .test_batch_memory import GB, _peak, write_big_line
from .test_dedup_inputs import planted, write_jsonl


class TextParts(LocalEngine):
    """The local engine with its parts coming back as text (as a remote cluster's do)."""

    shares_files = False


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setattr(splits_module, "MIN_SPLIT_BYTES", 1024)
    monkeypatch.setattr(splits_module, "SPLITS_PER_CORE", 8)
    return root


def _parts_left(root: Path) -> list[Path]:
    """Parts' folders left (the forkserver's own ``pymp-*`` folder lives with it)."""
    return list(root.glob("nearduppipe-parts-*"))


def _run(inputs: list[Path], out: Path, fmt: str, engine: Any) -> bytes:
    with out.open("w", encoding="utf-8", newline="") as f:
        dedup_records(inputs, engine=engine, output=f, output_format=fmt, keep_texts=False)
    return out.read_bytes()


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "xml"])
def test_parts_on_disk_make_the_bytes_parts_in_memory_make(
    tmp_path: Path, temp_root: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    records = planted(groups=30, distinct=200, seed=5)
    records[7]["text"] += " \u00e9\u4e2d\U0001f600"  # (characters of 2, 3 and 4 bytes)
    half = len(records) // 2
    inputs = [write_jsonl(tmp_path / "a.jsonl", records[:half])]
    inputs.append(write_jsonl(tmp_path / "b.jsonl", records[half:]))
    copied: list[str] = []
    real = write_task._copy_part

    def spy(writer: Any, name: str) -> None:
        copied.append(name)
        real(writer, name)

    monkeypatch.setattr(write_task, "_copy_part", spy)
    monkeypatch.setattr(write_task, "PART_CHUNK", 1000)  # (parts copied in many chunks)
    as_text = _run(inputs, tmp_path / f"text.{fmt}", fmt, TextParts(2))
    assert copied == []
    on_disk = _run(inputs, tmp_path / f"disk.{fmt}", fmt, LocalEngine(2))
    assert len(copied) > 6  # (one file per split with records to write)
    assert all(Path(name).parent.parent == temp_root for name in copied)
    assert on_disk == as_text
    assert _parts_left(temp_root) == []  # (every part deleted, and the folder)
    if fmt == "json":
        assert len(json.loads(on_disk)) < len(records)


def test_the_parts_folder_is_removed_when_the_output_pass_fails(
    tmp_path: Path, temp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input made unreadable between the passes: pass 2's task returns the error, the
    driver raises it, and the parts written so far go with their folder."""
    records = planted(groups=30, distinct=200, seed=6)
    inputs = [write_jsonl(tmp_path / "a.jsonl", records), tmp_path / "b.jsonl"]
    write_jsonl(inputs[1], records[:50])
    real = write_task.write_pass
    seen: list[str | None] = []

    def spoil_then_write(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[6] if len(args) > 6 else kwargs.get("part_dir"))
        inputs[1].write_bytes(b"\xff\xfe not utf-8\n" * 500)
        return real(*args, **kwargs)

    monkeypatch.setattr("nearduppipe.batch.records.write_pass", spoil_then_write)
    with pytest.raises(FeedError, match=r"b\.jsonl"):
        _run(inputs, tmp_path / "kept.jsonl", "jsonl", LocalEngine(2))
    assert seen and seen[0] is not None and not Path(seen[0]).exists()
    assert _parts_left(temp_root) == []


class InProcess(LocalEngine):
    """The local engine with pass 2's tasks run in this process (to break their files)."""

    def write(self, tasks: list[write_task.WriteTask]) -> Any:
        return (write_task.write_split(task) for task in tasks)


@pytest.mark.parametrize("where", ["open", "write"])
def test_a_part_that_cannot_be_written_names_the_temporary_folder(
    tmp_path: Path, temp_root: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A full disk where the parts go (TMPDIR): one error naming the folder, not "cannot
    read" an input; the folder is removed."""
    records = planted(groups=10, distinct=50, seed=7)
    inputs = [write_jsonl(tmp_path / "a.jsonl", records)]
    real = write_task._part_file

    def full(name: str, mode: str) -> Any:
        if where == "open":
            raise OSError(28, "No space left on device", name)
        return real("/dev/full", mode)  # (every write: ENOSPC, at the latest on close)

    monkeypatch.setattr(write_task, "_part_file", full)
    with pytest.raises(FeedError) as caught:
        _run(inputs, tmp_path / "kept.jsonl", "jsonl", InProcess(2))
    message = str(caught.value)
    assert "cannot write a part of the output in " + str(temp_root) in message
    assert "TMPDIR" in message and "No space left on device" in message
    assert "cannot read" not in message
    assert _parts_left(temp_root) == []


@pytest.mark.slow
def test_a_400_mb_line_is_copied_to_the_output_under_600_mb(tmp_path: Path) -> None:
    """Before: the task held the 400 MB record in its part's text and sent it to the driver
    (a peak of 1.0 GB in one process); now it goes through a file, a chunk at a time."""
    import gzip

    feed = tmp_path / "big.jsonl.gz"
    with gzip.open(feed, "wb", compresslevel=1) as f:
        f.write(json.dumps({"url": "https://a.example/1", "text": "a b c " * 100}).encode())
        f.write(b"\n")
        write_big_line(f)
    out = tmp_path / "kept.jsonl"
    proc, peak = _peak(["dedup", str(feed), "--quiet", "--workers", "2", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.stat().st_size > 400 << 20
    assert peak < 0.6 * GB, f"peak {peak / 2**20:.0f} MB"


def test_a_tmpdir_too_long_for_a_socket_gives_the_same_output(tmp_path: Path) -> None:
    """The forkserver's socket is made in multiprocessing's folder, made in TMPDIR, and a Unix
    socket's path holds 107 bytes: with a TMPDIR of 100 characters every dedup failed ("INPUT
    …: cannot read: AF_UNIX path too long"). That folder is then made in /tmp; nothing is left
    in TMPDIR, and the output is the one a short TMPDIR gives."""
    records = planted(groups=5, distinct=20, seed=3)
    feed = write_jsonl(tmp_path / "in.jsonl", records)
    outputs = []
    for name in ("short", "t" * max(1, 100 - len(str(tmp_path)) - 1)):
        temp = tmp_path / name
        temp.mkdir()
        out = tmp_path / f"{len(name)}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "nearduppipe.cli", "dedup", str(feed), "-o", str(out)],
            env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (len(str(temp)), done.stderr[-2000:])
        assert list(temp.iterdir()) == []
        outputs.append(out.read_bytes())
    assert len(str(temp)) >= 100 and outputs[0] == outputs[1] and outputs[0]


def test_an_error_that_names_no_file_does_not_blame_an_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError naming no file (the engine's processes failing to start, as above) was said
    as "INPUT <every input>: cannot read: …", sending the user to files that were fine."""
    from ..support.cli import run

    feed = write_jsonl(tmp_path / "in.jsonl", planted(groups=2, distinct=3, seed=3))

    def fails(*args: Any) -> Any:
        raise OSError("AF_UNIX path too long")

    monkeypatch.setattr(LocalEngine, "_map", fails)
    done = run("dedup", str(feed), "-o", str(tmp_path / "out.jsonl"))
    assert done.returncode == 2 and "cannot read" not in done.stderr, done.stderr
    assert f"AF_UNIX path too long (while reading {feed})" in done.stderr.splitlines()[-1]
