"""The sqlite store is a database: plain records, one writer whatever the path, durable or
reported writes (full disk, held locks), migration from format 1, and no input that makes it
unreadable. Real files, real processes."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nearduppipe import StoreError, open_store
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.sqlite.files import PLAIN_FORMAT
from nearduppipe.stores.sqlite.store import sqlite_path

A = 0x0123_4567_89AB_CDEF
B = 0xFEDC_BA98_7654_3210
W = (1 << 500) | 12345


def test_reopen_knows_everything_and_records_are_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "crawl.sqlite"
    with open_store(str(path), rule=Rule(similarity=0.95)) as s:
        for i in range(3000):
            s.add(Fingerprints(A ^ (i << 20), W ^ i), f"https://例子.cn/{i}", text=f"t{i}")
        assert s.check(Fingerprints(A, W), "dup").status == "duplicate"
        assert (
            s.check(Fingerprints(A ^ (5 << 20), W ^ 5), "https://例子.cn/5", job="j").status
            == "unchanged"
        )
    with open_store(f"sqlite:///{path}") as s:  # the rule is read from the store
        assert s.rule == Rule(similarity=0.95)
        assert len(s) == 3000 and s.decision_count() == 1
        assert s.counters()["revisits_unchanged"] == 1
        assert s.get("https://例子.cn/5").job == "j"
        assert [d.key for d in s.decisions()] == ["dup"]
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT key, typeof(value), value FROM neardup").fetchall()
    conn.close()
    assert {t for _, t, _ in rows} == {"text"}
    records = {k: json.loads(v) for k, _, v in rows}
    assert records["m:format"] == PLAIN_FORMAT == 2  # (no aliases: what 0.2 reads)
    rid, job = records["k:https://例子.cn/7"]
    assert job is None and records[f"i:{rid:012x}"][:2] == [
        f"{A ^ (7 << 20):016x}",
        f"{W ^ 7:0128x}",
    ]
    with open_store(str(path), reset=True) as s:
        assert len(s) == 0 and s.decision_count() == 0


def test_uri_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///rel/x.sqlite") == Path("rel/x.sqlite")
    assert sqlite_path("sqlite:////abs/x.sqlite") == Path("/abs/x.sqlite")
    with open_store("sqlite:///rel/x.sqlite") as s:
        s.add(A, "k")
    assert (tmp_path / "rel" / "x.sqlite").exists()
    with pytest.raises(StoreError, match="unknown store scheme"):
        open_store("mongodb://x")
    with pytest.raises(StoreError):
        open_store("sqlite://host/x")
    with pytest.raises(StoreError, match="ttl"):
        open_store("memory:", ttl=float("nan"))
    with pytest.raises(StoreError, match="ttl"):
        open_store(str(tmp_path / "t.sqlite"), ttl=1e-300)


def test_corrupt_foreign_empty_newer_and_pickled_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(4096))
    before = junk.read_bytes()
    with pytest.raises(StoreError, match="not a sqlite database"):
        open_store(str(junk))
    assert junk.read_bytes() == before
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(StoreError, match="empty file"):
        open_store(str(empty))
    assert empty.stat().st_size == 0
    with open_store(str(empty), reset=True) as s:  # asked for: a new store
        s.add(A, "k")
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="another program"):
        open_store(str(foreign))
    newer = tmp_path / "newer.sqlite"
    with open_store(str(newer)):
        pass
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE neardup SET value = '4' WHERE key = 'm:format'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer nearduppipe"):
        open_store(str(newer))

    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "evil.sqlite"
    with open_store(str(evil)) as s:
        s.add(A, "k")
    conn = sqlite3.connect(evil)
    conn.execute("UPDATE neardup SET value = ? WHERE key LIKE 'i:%'", (pickle.dumps(Exploit()),))
    conn.commit()
    conn.close()
    # The index loads from the snapshot taken at close, which an edit of a row's value does not
    # change: the record is refused when it is read. Without the snapshot, at open.
    with open_store(str(evil)) as s, pytest.raises(StoreError, match="not JSON text"):
        s.get("k")
    conn = sqlite3.connect(evil)
    conn.execute("DELETE FROM neardup_index")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not JSON text"):
        open_store(str(evil))
    conn = sqlite3.connect(evil)
    conn.execute("UPDATE neardup SET value = '[\"zz\"' WHERE key LIKE 'i:%'")  # hand-edited
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"record 'i:000000000000' is damaged"):
        open_store(str(evil))
    assert not marker.exists()


HOLD = """
import sys, time
from nearduppipe import open_store
s = open_store(sys.argv[1])
print('ready', flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("how", ["same", "symlink", "relative"])
def test_one_writer_whatever_path_reaches_the_file(tmp_path: Path, how: str) -> None:
    """(A hard link is refused for writing through either name: tests/faults/test_store_files.)"""
    path = tmp_path / "shared.sqlite"
    with open_store(str(path)) as s:
        s.add(A, "k")
    other = {
        "same": path,
        "symlink": tmp_path / "link.sqlite",
        "relative": Path(os.path.relpath(path)),
    }[how]
    if how == "symlink":
        other.symlink_to(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match=r"in use by another process.*redis"):
            open_store(str(other))
    finally:
        holder.kill()
        holder.wait()
    with open_store(str(other)) as s:  # the locks die with their process
        assert len(s) == 1


def test_read_only_directory_is_not_damaged(tmp_path: Path) -> None:
    """Root ignores permissions, so as root the check runs with the permission-override
    capabilities dropped (util-linux's setpriv)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    with open_store(str(ro / "s.sqlite")) as s:
        s.add(A, "k")
    for extra in ro.glob("s.sqlite*"):
        if extra.name != "s.sqlite":
            extra.unlink()
    code = """
    import sys
    from nearduppipe import open_store, StoreError
    try:
        open_store(sys.argv[1])
    except StoreError as e:
        print('write:', e)
    with open_store(sys.argv[1], read_only=True) as s:
        print('read:', len(s))
    """
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permissions cannot be enforced")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
    ro.chmod(0o555)
    try:
        out = subprocess.run(
            [*prefix, sys.executable, "-c", textwrap.dedent(code), str(ro / "s.sqlite")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        ro.chmod(0o755)
    assert "not writable" in out.stdout and "read: 1" in out.stdout, out.stdout + out.stderr
    assert "damaged" not in out.stdout


def _format_1(path: Path) -> None:
    """A store as format 1 wrote it: e:<id> rows (a key stored twice), d:<id> rows."""
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "neardup" (key TEXT PRIMARY KEY, value BLOB)')
    rows = [("m:format", "1"), ("m:created", "1700000000.0")]
    for i, (fp, key) in enumerate(
        [(A, "https://a/1"), (A ^ 0xFF << 40, "https://a/2"), (A ^ 0xF0F0F0F0F0, "https://a/1")]
    ):
        rows.append((f"e:{i:012x}", json.dumps([f"{fp:016x}", 1700000000.0 + i, key])))
    rows.append(
        (
            "d:000000000000",
            json.dumps(
                {
                    "key": "https://a/3",
                    "fp": f"{A ^ 1:016x}",
                    "match": "https://a/1",
                    "match_fp": f"{A:016x}",
                    "distance": 1,
                    "t": 1700000100.0,
                }
            ),
        )
    )
    conn.executemany("INSERT INTO neardup VALUES (?, ?)", rows)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("asked", [None, "default", "aliases"])
def test_format_1_is_read_as_is_and_migrated_on_write(tmp_path: Path, asked: str | None) -> None:
    """Migrated with the opener's rule; aliases only when asked (NEARDUP_ALIASES = True), not
    by their default, which is for new stores: then format 3, which earlier releases refuse."""
    rule = {
        None: None,
        "default": Rule(aliases=True, aliases_given=False),
        "aliases": Rule(aliases=True),
    }[asked]
    path = tmp_path / "v1.sqlite"
    _format_1(path)
    before = path.read_bytes()
    with open_store(str(path), read_only=True) as s:  # reads never write
        assert [(e.key, e.fingerprint) for e in s.entries()] == [
            ("https://a/2", A ^ 0xFF << 40),
            ("https://a/1", A ^ 0xF0F0F0F0F0),
        ]
        assert len(s) == 2 and s.decision_count() == 1
        assert s.rule.extraction == 1  # (made before extraction versions)
    assert path.read_bytes() == before
    with open_store(str(path), rule=rule) as s:
        assert len(s) == 2 and s.get("https://a/1").wide is None
        assert s.rule.aliases is (asked == "aliases")
        assert s.rule.extraction == 1  # (not the opener's newest: its pages are version 1's)
        # legacy entries: 64-bit distance <= 3, whatever the wide side says
        assert s.check(Fingerprints(A ^ 0xF0F0F0F0F0 ^ 0b111, W), "x").match.key == "https://a/1"
        assert s.check(Fingerprints(A ^ 0xF0F0F0F0F0 ^ 0b1111, W), "y").status == "new"
        assert [d.key for d in s.decisions()] == ["https://a/3", "x"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM neardup WHERE key LIKE 'e:%'").fetchone() == (0,)
    want = "3" if asked == "aliases" else "2"
    assert conn.execute("SELECT value FROM neardup WHERE key = 'm:format'").fetchone() == (want,)
    conn.close()
    with open_store(str(path), read_only=True) as s:
        assert s.rule.aliases is (asked == "aliases") and s.format_version == int(want)
        assert s.rule.extraction == 1


def test_ttl_prunes_at_open_and_vacuum_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ttl.sqlite"
    now = [1_000_000.0]
    with open_store(str(path), ttl=3600, clock=lambda: now[0]) as s:
        for i in range(3000):
            s.add(Fingerprints(A ^ i << 30, W), f"k{i}", text="x" * 200)
    size = path.stat().st_size
    now[0] += 7200
    with open_store(str(path), ttl=3600, clock=lambda: now[0]) as s:
        assert len(s) == 0
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    assert path.stat().st_size < size / 4


def test_the_index_snapshot_is_used_only_while_it_matches_the_rows(tmp_path: Path) -> None:
    """A reopen loads the index from the snapshot written at close; a write by anything else
    (rows changed without the snapshot's token, or a row gone) makes it fall back to the rows."""
    path = tmp_path / "snap.sqlite"
    fps = [Fingerprints(A ^ (0xFFFF << (16 * (i % 3))) ^ i << 50, W ^ i) for i in range(3)]
    with open_store(str(path)) as s:
        for i, f in enumerate(fps):
            s.add(f, f"k{i}", text=f"t{i}")
        s.remove("k1")
    conn = sqlite3.connect(path)
    (header,) = conn.execute("SELECT value FROM neardup_index WHERE name = 'header'").fetchone()
    state = json.loads(
        conn.execute("SELECT value FROM neardup WHERE key = 'm:state'").fetchone()[0]
    )
    assert json.loads(header)["token"] == state["snapshot"] and json.loads(header)["n"] == 2
    conn.close()
    with open_store(str(path)) as s:  # from the snapshot
        assert len(s) == 2 and s.get("k1") is None
        assert [m.key for m in s.near(fps[2])] == ["k2"]
        assert s.check(fps[0], "k0").status == "unchanged"  # the key filter knows k0
    # an older nearduppipe adds a page: rows and m:state, knowing nothing of the snapshot
    with open_store(str(path)):
        pass
    conn = sqlite3.connect(path)
    state = json.loads(
        conn.execute("SELECT value FROM neardup WHERE key = 'm:state'").fetchone()[0]
    )
    rid = state.pop("snapshot") and state["rseq"]
    state["rseq"] = rid + 1
    conn.execute("REPLACE INTO neardup VALUES (?, ?)", ("k:new", f"[{rid},null]"))
    conn.execute(
        "REPLACE INTO neardup VALUES (?, ?)",
        (f"i:{rid:012x}", f'["{B:016x}","",1.5,null,"new"]'),
    )
    conn.execute("REPLACE INTO neardup VALUES ('m:state', ?)", (json.dumps(state),))
    conn.commit()
    conn.close()
    with open_store(str(path)) as s:  # the token is gone: from the rows
        assert len(s) == 3 and s.get("new") is not None
        assert s.check(B, "new").status == "unchanged"
    with open_store(str(path)):  # a new snapshot, then
        pass
    # the first row lost behind the store's back, the token intact: the ends no longer match
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM neardup WHERE key = 'i:000000000000'")
    conn.commit()
    conn.close()
    with open_store(str(path), read_only=True) as r:
        assert len(r) == 2 and {e.key for e in r.entries()} == {"k2", "new"}
