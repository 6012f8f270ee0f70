"""Inputs Python's json module refuses for reasons other than syntax (a RecursionError for deep
nesting, a ValueError for a number of more than 4,300 digits): ``nearduppipe dedup`` says which
record, in one line with exit status 2, instead of a traceback; and a 0-byte file left where a
store should be says how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.cli import run_process
from ..support.redis_server import RedisServer

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("deep.jsonl", '{"url": "a", "text": ' + DEEP + "}\n", "line 1: JSON nested too deeply"),
        (
            "number.jsonl",
            '{"url": "a", "text": "x"}\n{"url": "b", "n": ' + "9" * 100_000 + "}\n",
            "line 2: JSON that cannot be read: Exceeds the limit (4300 digits)",
        ),
        (
            "deep.json",
            '[{"url": "a", "text": "x"}, ' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "]",
            "record 2: JSON nested too deeply",
        ),
    ],
)
def test_dedup_names_the_record_it_cannot_read(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    feed = tmp_path / name
    feed.write_text(content)
    proc = run_process("dedup", str(feed), "-o", str(tmp_path / "kept.jsonl"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert f"nearduppipe dedup: INPUT {feed}: {message}" in proc.stderr, proc.stderr[-2000:]


def test_an_empty_file_where_a_store_should_be_says_how_to_fix_it(tmp_path: Path) -> None:
    """A 0-byte file (an open that hit a full disk, ``touch``) is not a store: every command
    says so and what to do, and nothing writes into it."""
    path = tmp_path / "empty.sqlite"
    path.touch()
    proc = run_process("info", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "an empty file (0 bytes), not a store; delete it to start a new store" in proc.stderr
    assert path.stat().st_size == 0


def test_a_cluster_uri_for_a_single_server_is_one_line(redis_server: RedisServer) -> None:
    """redis-py's cluster errors are not RedisErrors: ``info redis+cluster://`` on a server that
    is not a cluster raised a traceback."""
    base = redis_server.url.split("://", 1)[1].split("/", 1)[0]
    proc = run_process("info", f"redis+cluster://{base}/?prefix=x")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "this server is not a Redis Cluster; use redis:// for a single server" in proc.stderr
