"""Store records edited by hand (or written by another program): wrong JSON types, missing
fields, a fingerprint that is no number or beyond 64 bits, a 100,000-digit number, bytes that
are not UTF-8, a truncated record, a record of a kind no store writes. ``nearduppipe info``,
``report`` and ``copy`` and an open for a crawl never show a traceback: a record they must read
is one line naming it (the sqlite row key; the Redis key and field) and saying how to proceed,
exit status 2, and nothing written; a record they need not read is let be, and ``copy`` says
what it did not copy. Before: a fingerprint beyond 64 bits or a decision distance of 10^11 was
reported and copied as it was (a copy to Redis, and a copy of such an entry anywhere, then
failed with a traceback), and every damaged Redis record was a traceback (``struct.error``,
``UnicodeDecodeError``, ``KeyError``, ``JSONDecodeError``). Real sqlite files, a real
redis-server, the command run as a child process where it matters."""

from __future__ import annotations

import contextlib
import random
import shutil
import sqlite3
import struct
from pathlib import Path

import pytest
import redis

from nearduppipe import StoreError, open_store
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.format3 import Record, encode_record

from ..support.cli import run, run_process
from ..support.redis_format3 import digest
from ..support.redis_server import RedisServer

HUGE = "9" * 100_000


def _pages() -> list[Fingerprints]:
    rng = random.Random(7)
    return [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(8)]


def _fill(uri: str, **options: object) -> None:
    """Eight pages and one near-duplicate (so there is a decision record)."""
    pages = _pages()
    with open_store(uri, **options) as s:  # type: ignore[arg-type]
        for i, fps in enumerate(pages):
            assert s.check(fps, f"k{i}", text=f"text {i}").status == "new"
        assert s.check(pages[0], "copy0").status == "duplicate"


def _one_line_naming(proc: object, command: str, *names: str) -> str:
    code, out, err = proc.returncode, proc.stdout, proc.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in err, err[-3000:]
    assert code == 2, (code, out[-500:], err[-2000:])
    assert err.count("\n") == 1 and err.startswith(f"nearduppipe {command}: "), err[-2000:]
    for name in names:
        assert name in err, (name, err)
    return str(err)


# -- sqlite ------------------------------------------------------------------------------------

ENTRY = "i:000000000000"  # k0's entry row
DECISION = "d:000000000000"

# (name, row key, value written by hand: text, bytes stored as text, or None = delete the row)
SQLITE_DAMAGE = [
    ("entry: wrong JSON types", ENTRY, "[1, 2, 3, 4, 5]"),
    ("entry: a key that is a number", ENTRY, '["0123456789abcdef", "", 1.5, null, 7]'),
    ("entry: missing fields", ENTRY, '["0123456789abcdef"]'),
    ("entry: fingerprint not a number", ENTRY, '["zzzzzzzzzzzzzzzz", "", 1.5, null, "k0"]'),
    ("entry: fingerprint beyond 64 bits", ENTRY, '["1ffffffffffffffff", "", 1.5, null, "k0"]'),
    ("entry: negative fingerprint", ENTRY, '["-1", "", 1.5, null, "k0"]'),
    ("entry: 100,000 hex digits", ENTRY, f'["{"f" * 100_000}", "", 1.5, null, "k0"]'),
    ("entry: a 100,000-digit time", ENTRY, f'["0123456789abcdef", "", {HUGE}, null, "k0"]'),
    ("entry: a time that is NaN", ENTRY, '["0123456789abcdef", "", NaN, null, "k0"]'),
    ("entry: not UTF-8", ENTRY, b'["0123456789abcdef", "", 1.5, null, "k\xff\xfe"]'),
    ("entry: truncated", ENTRY, '["0123456789abcdef", "", 1.5, nu'),
    ("key: an object", "k:k3", '{"a": 1}'),
    ("decision: wrong JSON types", DECISION, "[1, 2]"),
    ("decision: missing fields", DECISION, '{"key": "x"}'),
    (
        "decision: fingerprint beyond 64 bits",
        DECISION,
        '{"key": "x", "fp": "1ffffffffffffffff", "match": "y", "match_fp": "0", "distance": 1,'
        ' "t": 1.0}',
    ),
    (
        "decision: a distance of 10^11",
        DECISION,
        '{"key": "x", "fp": "1", "match": "y", "match_fp": "0", "distance": 99999999999, "t": 1.0}',
    ),
    (
        "decision: a 100,000-digit distance",
        DECISION,
        f'{{"key": "x", "fp": "1", "match": "y", "match_fp": "0", "distance": {HUGE}, "t": 1}}',
    ),
    ("decision: truncated", DECISION, '{"key": "x", "fp": "1", "ma'),
    ("state: a counter that is text", "m:state", '{"rseq": "many"}'),
]


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clean") / "clean.sqlite"
    _fill(str(path))
    return path


def _edit(path: Path, key: str, value: str | bytes | None, snapshot: bool = True) -> None:
    """What a user does with the sqlite3 module: UPDATE, INSERT or DELETE a row (bytes: stored
    as TEXT, so that sqlite hands back bytes that are not UTF-8, as a hand edit can)."""
    conn = sqlite3.connect(path)
    if value is None:
        conn.execute("DELETE FROM neardup WHERE key = ?", (key,))
    elif isinstance(value, bytes):
        conn.execute("REPLACE INTO neardup VALUES (?, CAST(? AS TEXT))", (key, value))
    else:
        conn.execute("REPLACE INTO neardup VALUES (?, ?)", (key, value))
    if not snapshot:  # (as after a crawl that was killed: the index is read from the rows)
        conn.execute("DELETE FROM neardup_index")
    conn.commit()
    conn.close()


def _damaged_copy(sqlite_store: Path, tmp_path: Path, key: str, value: str | bytes | None) -> Path:
    path = tmp_path / "edited.sqlite"
    shutil.copy(sqlite_store, path)
    _edit(path, key, value)
    return path


@pytest.mark.parametrize(("name", "key", "value"), SQLITE_DAMAGE, ids=[c[0] for c in SQLITE_DAMAGE])
def test_sqlite_commands_name_the_hand_edited_row(
    sqlite_store: Path, tmp_path: Path, name: str, key: str, value: str | bytes
) -> None:
    path = _damaged_copy(sqlite_store, tmp_path, key, value)
    dst = tmp_path / "copy.sqlite"
    if key.startswith("k:"):  # (read at an open without a snapshot: the next test)
        for args in (["report", str(path)], ["copy", str(path), str(dst)]):
            assert run(*args).returncode == 0
        return
    # report and copy read every record: one line naming the row and what to do
    for args in (["report", str(path)], ["copy", str(path), str(dst)]):
        err = _one_line_naming(run(*args), args[0], str(path), key)
        assert "restore" in err and "sqlite3" in err, err
    assert not dst.exists()  # nothing written: the copy is renamed into place only when done
    # info reads the counts only: it shows them, or refuses the same way (m:state)
    info = run("info", str(path))
    if key == "m:state":
        _one_line_naming(info, "info", key)
    else:
        assert info.returncode == 0 and "entries:" in info.stdout, info.stderr


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [c for c in SQLITE_DAMAGE if c[1] in (ENTRY, "k:k3", "m:state")],
    ids=[c[0] for c in SQLITE_DAMAGE if c[1] in (ENTRY, "k:k3", "m:state")],
)
def test_sqlite_open_for_a_crawl_names_the_hand_edited_row(
    sqlite_store: Path, tmp_path: Path, name: str, key: str, value: str | bytes
) -> None:
    """Read from the rows (no index snapshot, as after a killed crawl): the open refuses."""
    path = tmp_path / "edited.sqlite"
    shutil.copy(sqlite_store, path)
    _edit(path, key, value, snapshot=False)
    with pytest.raises(StoreError) as caught:
        open_store(str(path))
    message = str(caught.value)
    assert key in message and "restore" in message and "\n" not in message, message


def test_sqlite_a_damaged_entry_behind_the_snapshot_is_named_when_a_check_reads_it(
    sqlite_store: Path, tmp_path: Path
) -> None:
    """The index snapshot does not change with a hand edit of a row: the open uses it, and the
    row is refused when a check reads it (the crawl's store-error policy then applies)."""
    path = _damaged_copy(sqlite_store, tmp_path, ENTRY, '["1ffffffffffffffff","",1.5,null,"k0"]')
    pages = _pages()
    with open_store(str(path)) as s:
        assert s.check(pages[3], "k3").status == "unchanged"  # (other rows: as before)
        with pytest.raises(StoreError, match=f"{ENTRY}.*out of range.*restore"):
            s.check(pages[0], "k0")


def test_sqlite_decisions_edited_by_hand_do_not_stop_a_crawl(
    sqlite_store: Path, tmp_path: Path
) -> None:
    path = _damaged_copy(sqlite_store, tmp_path, DECISION, "[1, 2]")
    _edit(path, "m:state", None, snapshot=False)  # (read from the rows too)
    pages = _pages()
    with open_store(str(path)) as s:
        assert s.check(pages[5], "k5").status == "unchanged"
        assert s.check(pages[1], "another").status == "duplicate"


def test_sqlite_copy_says_what_it_did_not_copy(sqlite_store: Path, tmp_path: Path) -> None:
    """A row of a kind no store writes, and an entry row no page key points to (its ``k:``
    row deleted by hand): the copy goes on, and says so with a count (a real process)."""
    path = _damaged_copy(sqlite_store, tmp_path, "z:mine", '"a note of my own"')
    _edit(path, "k:k5", None, snapshot=False)  # (with the snapshot, k5 would stay a page)
    for command in (["info", str(path)], ["report", str(path)]):
        proc = run_process(*command)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    dst = tmp_path / "copy.sqlite"
    proc = run_process("copy", str(path), str(dst))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "copied 7 fingerprints and 1 decisions" in proc.stdout, proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert "warning" in lines[0] and "1 row(s)" in lines[0] and "'z:mine'" in lines[0], lines
    assert "1 entry row(s)" in lines[1] and "no page key" in lines[1], lines
    with open_store(str(dst), read_only=True) as copied:
        assert sorted(e.key for e in copied.entries()) == [f"k{i}" for i in range(8) if i != 5]


def test_sqlite_process_says_it_in_one_line(sqlite_store: Path, tmp_path: Path) -> None:
    """The same as a shell sees it: a child process, its exit status and its streams."""
    path = _damaged_copy(sqlite_store, tmp_path, ENTRY, b'["0123456789abcdef","",1.5,null,"\xff"]')
    for args in (["report", str(path)], ["copy", str(path), str(tmp_path / "c.sqlite")]):
        _one_line_naming(run_process(*args), args[0], ENTRY, "DELETE FROM neardup")


# -- Redis ---------------------------------------------------------------------------------------

PREFIX = "hand"
# a format-3 record of k0 (no host prefix: id 0; no job), as the store writes it
GOOD = encode_record(Record(0x0123_4567_89AB_CDEF, 1.5, 1, None, 0, 0, "k0", None))

# (name, "e" = an entry field / "d" = a decision item, the bytes written by hand)
REDIS_DAMAGE = [
    ("entry: empty", "e", b""),
    ("entry: truncated", "e", GOOD[:12]),
    ("entry: a key that is not UTF-8", "e", GOOD[:-2] + b"\xff\xfe"),
    ("entry: a length beyond its end", "e", GOOD[:-3] + b"\x7f" + GOOD[-2:]),
    ("entry: a time that is NaN", "e", GOOD[:9] + struct.pack("<d", float("nan")) + GOOD[17:]),
    ("entry: an unknown kind (flags)", "e", b"\x07" + GOOD[1:]),
    ("entry: JSON instead", "e", b'{"fp": "0123456789abcdef", "t": 1.5, "key": "k0"}'),
    ("entry: trailing bytes", "e", GOOD + b"more"),
    ("decision: truncated", "d", b"\x02\x00"),
    ("decision: an unknown kind (tag)", "d", b"\x09garbage"),
    ("decision: JSON, truncated", "d", b'{"key": "x", "fp'),
    ("decision: JSON, missing fields", "d", b'{"key": "x"}'),
    (
        "decision: JSON, wrong types",
        "d",
        b'{"key": ["x"], "fp": 1, "match": "y", "match_fp": "0", "distance": "a", "t": 1}',
    ),
    (
        "decision: JSON, fingerprint beyond 64 bits",
        "d",
        b'{"key": "x", "fp": "1ffffffffffffffff", "match": "y", "match_fp": "0", "distance": 1,'
        b' "t": 1}',
    ),
    (
        "decision: JSON, a 100,000-digit distance",
        "d",
        b'{"key": "x", "fp": "1", "match": "y", "match_fp": "0", "distance": '
        + HUGE.encode()
        + b', "t": 1}',
    ),
]


def _address(prefix: str, key: str) -> tuple[str, bytes]:
    """The bucket hash and field of a page key's entry (format 3: its key's xxh3 digest)."""
    d = digest(key)
    return "{" + prefix + "}:b" + d[:2].hex(), d[2:]


def _redis_edit(server: RedisServer, kind: str, value: bytes) -> str:
    """HSET / LSET ``value`` over k0's entry record or the first decision; what names it."""
    client = redis.Redis.from_url(server.url)
    try:
        base = "{" + PREFIX + "}"
        if kind == "e":
            bucket, field = _address(PREFIX, "k0")
            assert client.hexists(bucket, field)
            client.hset(bucket, field, value)
            return f"{bucket} field"
        client.lset(f"{base}:d", 0, value)  # type: ignore[arg-type]
        return f"{base}:d item 0"
    finally:
        client.close()


@pytest.mark.parametrize(("name", "kind", "value"), REDIS_DAMAGE, ids=[c[0] for c in REDIS_DAMAGE])
def test_redis_commands_name_the_hand_edited_record(
    server: RedisServer, tmp_path: Path, name: str, kind: str, value: bytes
) -> None:
    uri = f"{server.url}?prefix={PREFIX}"
    _fill(uri)
    where = _redis_edit(server, kind, value)
    fix = "HDEL" if kind == "e" else "LREM"
    info = run("info", uri)  # (the counts only)
    assert info.returncode == 0 and "entries:" in info.stdout, info.stderr
    _one_line_naming(run("report", uri), "report", where, fix, "restore")
    dst = tmp_path / "copy.sqlite"
    _one_line_naming(run("copy", uri, str(dst)), "copy", where, fix)
    assert not dst.exists()
    # into Redis, what was imported before the damaged record stays: the line says so
    err = _one_line_naming(run("copy", uri, f"{server.url}?prefix=other"), "copy", where, fix)
    assert "may hold part of the copy" in err and "--reset" in err, err


def test_redis_open_for_a_crawl_and_the_damaged_entry(server: RedisServer) -> None:
    """The index is read from the log, not the records: the open works; a check that reaches
    a damaged record is a StoreError (the crawl's NEARDUP_ON_STORE_ERROR applies), never
    another exception."""
    uri = f"{server.url}?prefix={PREFIX}"
    _fill(uri)
    _redis_edit(server, "e", GOOD[:9] + struct.pack("<d", float("nan")) + GOOD[17:])
    pages = _pages()
    with open_store(uri) as s:
        assert s.check(pages[4], "k4").status == "unchanged"
        assert s.check(Fingerprints(5, 7), "new").status == "new"
        with pytest.raises(StoreError, match="damaged entry record"):
            s.get("k0")
    _redis_edit(server, "e", GOOD[:12])  # truncated: the check's script cannot read it
    # (the script's own message, which names no record; or no error if it is not reached)
    with open_store(uri) as s, contextlib.suppress(StoreError):
        s.check(pages[0], "near k0")


def test_redis_copy_says_what_it_did_not_copy(server: RedisServer, tmp_path: Path) -> None:
    """A key of a kind no store writes under the prefix, and an entry record deleted by hand
    (``HDEL``): the copy goes on and says so (a real process)."""
    uri = f"{server.url}?prefix={PREFIX}"
    _fill(uri)
    client = redis.Redis.from_url(server.url)
    try:
        base = "{" + PREFIX + "}"
        client.set(f"{base}:mine", "a note of my own")
        assert client.hdel(*_address(PREFIX, "k5")) == 1
    finally:
        client.close()
    dst = tmp_path / "copy.sqlite"
    proc = run_process("copy", uri, str(dst))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "copied 7 fingerprints" in proc.stdout, proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and all("warning" in line for line in lines), proc.stderr
    assert "1 key(s)" in lines[0] and "{hand}:mine" in lines[0], lines
    assert "counts 8 pages" in lines[1] and "held 7" in lines[1], lines


def test_redis_process_says_it_in_one_line(server: RedisServer, tmp_path: Path) -> None:
    uri = f"{server.url}?prefix={PREFIX}"
    _fill(uri)
    where = _redis_edit(server, "e", b"\x07" + GOOD[1:])
    for args in (["report", uri], ["copy", uri, str(tmp_path / "c.sqlite")]):
        err = _one_line_naming(run_process(*args), args[0], where, "HDEL")
        assert "unknown kind" in err, err
