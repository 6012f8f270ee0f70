"""One behavioural suite for every store backend, plus sqlite's persistence and safety."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nearduppipe import Match, Store, StoreError, open_store
from nearduppipe.stores.sqlite import FORMAT_VERSION, sqlite_path

A = 0x0123_4567_89AB_CDEF


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        with open_store(server.url, prefix=f"test:{request.node.name}", reset=True) as s:
            yield s
        return
    uri = "memory:" if request.param == "memory" else str(tmp_path / "s.sqlite")
    with open_store(uri) as s:
        yield s


def test_same_answers_as_brute_force(store: Store) -> None:
    rng = np.random.default_rng(17)
    base = rng.integers(0, np.iinfo(np.uint64).max, 3000, dtype=np.uint64, endpoint=True).tolist()
    base += [(1 << 64) - 1, 0, 1 << 63]  # the top bit must survive (no float scores)
    kept: list[tuple[str, int]] = []
    matched = 0
    for i, fp in enumerate(base):
        probe = fp
        if i % 3 == 0 and kept:  # 0..4 bits away from a stored fingerprint
            probe = kept[int(rng.integers(0, len(kept)))][1]
            for b in rng.choice(64, size=int(rng.integers(0, 5)), replace=False).tolist():
                probe ^= 1 << b
        got = store.check_and_add(probe, f"k{i}")
        near = [(k, f, d) for k, f in kept if (d := (f ^ probe).bit_count()) <= 3]
        near.sort(key=lambda m: m[2])  # stable: oldest first among equals
        if near:
            assert got == Match(*near[0]), i
            matched += 1
        else:
            assert got is None, i
            kept.append((f"k{i}", probe))
    assert matched > 700
    assert len(store) == len(kept)
    assert [(e.key, e.fingerprint) for e in store.entries()] == kept


def test_check_and_add(store: Store) -> None:
    assert store.check_and_add(A, "https://a/1") is None
    assert len(store) == 1
    m = store.check_and_add(A ^ 0b101, "https://a/2")
    assert m == Match("https://a/1", A, 2)
    assert len(store) == 1  # near-duplicates are not stored
    assert store.check_and_add(A ^ 0b1111, "https://a/3") is None  # distance 4 > 3
    assert store.check_and_add(A ^ 0b1011, "https://a/4") == Match("https://a/3", A ^ 0b1111, 1)
    decisions = list(store.decisions())
    assert [(d.key, d.matched_key, d.distance) for d in decisions] == [
        ("https://a/2", "https://a/1", 2),
        ("https://a/4", "https://a/3", 1),
    ]
    assert store.decision_count() == 2
    assert [e.key for e in store.entries()] == ["https://a/1", "https://a/3"]


def test_near_is_sorted_and_read_only(store: Store) -> None:
    store.add(A ^ 0b111, "far")
    store.add(A ^ 0b1, "near")
    store.add(A ^ 0b10, "near-too")
    assert store.near(A) == [
        Match("near", A ^ 1, 1),
        Match("near-too", A ^ 2, 1),
        Match("far", A ^ 7, 3),
    ]
    assert len(store) == 3 and store.decision_count() == 0


def test_bad_arguments_and_closed(store: Store) -> None:
    with pytest.raises(TypeError):
        store.check_and_add(A, 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.check_and_add(-5, "k")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError):
        store.check_and_add(A, "k")


def test_check_and_add_is_atomic_across_threads(store: Store) -> None:
    # 8 threads each send one member of every group at once: exactly one per group is kept.
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 1 << 63, 300, dtype=np.uint64).tolist()
    kept: list[str] = []
    barrier = threading.Barrier(8)

    def worker(t: int) -> None:
        barrier.wait()
        for g, fp in enumerate(groups):
            if store.check_and_add(fp ^ (1 << t), f"g{g}/t{t}") is None:
                kept.append(f"g{g}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(kept) == sorted(f"g{g}" for g in range(len(groups)))
    assert len(store) == 300 and store.decision_count() == 300 * 7


# -- sqlite: persistence ----------------------------------------------------------------------


def test_sqlite_reopen_knows_everything(tmp_path: Path) -> None:
    path = tmp_path / "crawl.sqlite"
    rng = np.random.default_rng(11)
    fps = rng.integers(0, 1 << 63, 5000, dtype=np.uint64).tolist()
    with open_store(str(path)) as s:
        for i, fp in enumerate(fps):
            assert s.check_and_add(fp, f"u{i}") is None
        assert s.check_and_add(fps[10] ^ 1, "dup") == Match("u10", fps[10], 1)
    with open_store(f"sqlite:///{path}") as s:  # relative form of an absolute path: sqlite:////
        assert len(s) == 5000 and s.decision_count() == 1
        assert s.check_and_add(fps[4999] ^ 6, "dup2") == Match("u4999", fps[4999], 2)
        assert [d.key for d in s.decisions()] == ["dup", "dup2"]
        assert [e.fingerprint for e in s.entries()] == fps
    with open_store(str(path), reset=True) as s:
        assert len(s) == 0 and s.decision_count() == 0


def test_sqlite_file_is_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.check_and_add(A, "https://例子.cn/页")
        s.check_and_add(A ^ 1, "https://b/")
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT key, typeof(value), value FROM neardup").fetchall()
    conn.close()
    assert {t for _, t, _ in rows} == {"text"}
    records = {k: json.loads(v) for k, _, v in rows}
    assert records["m:format"] == FORMAT_VERSION
    assert records["e:000000000000"][0] == f"{A:016x}"
    assert records["e:000000000000"][2] == "https://例子.cn/页"
    assert records["d:000000000000"]["match"] == "https://例子.cn/页"


def test_uri_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///rel/x.sqlite") == Path("rel/x.sqlite")
    assert sqlite_path("sqlite:////abs/x.sqlite") == Path("/abs/x.sqlite")
    assert sqlite_path("plain/x.sqlite") == Path("plain/x.sqlite")
    with open_store("sqlite:///rel/x.sqlite") as s:
        s.add(A, "k")
    assert (tmp_path / "rel" / "x.sqlite").exists()
    with pytest.raises(StoreError, match="unknown store scheme"):
        open_store("mongodb://x")
    with pytest.raises(StoreError):
        open_store("sqlite://host/x")
    with pytest.raises(StoreError, match="unknown options"):
        open_store("memory:", bogus=1)


# -- sqlite: corrupt, foreign, locked and read-only files ------------------------------------


def _unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before


def test_random_bytes_and_truncated_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(4096))
    before = junk.read_bytes()
    with pytest.raises(StoreError, match="not a sqlite database"):
        open_store(str(junk))
    _unchanged(junk, before)

    good = tmp_path / "good.sqlite"
    with open_store(str(good)) as s:
        for i in range(3000):
            s.add(i * 7919 << 20, f"k{i}")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(StoreError, match=r"cut\.sqlite"):
        open_store(str(cut))


def test_foreign_sqlite_and_newer_format(tmp_path: Path) -> None:
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        open_store(str(foreign))
    _unchanged(foreign, before)

    newer = tmp_path / "newer.sqlite"
    with open_store(str(newer)):
        pass
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE neardup SET value = ? WHERE key = 'm:format'", (str(FORMAT_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer nearduppipe"):
        open_store(str(newer))


def test_pickle_payload_is_never_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "evil.sqlite"
    with open_store(str(path)) as s:
        s.add(A, "k")
    conn = sqlite3.connect(path)
    payload = pickle.dumps(Exploit())
    conn.execute("UPDATE neardup SET value = ? WHERE key = 'e:000000000000'", (payload,))
    conn.execute("INSERT INTO neardup VALUES ('d:000000000000', ?)", (payload,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not JSON text"):
        open_store(str(path))
    assert not marker.exists()


def test_second_process_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from nearduppipe import open_store;"
            "s = open_store(sys.argv[1]); print('ready', flush=True); time.sleep(30)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(
            StoreError, match=rf"in use by another process \(pid {holder.pid}\).*redis"
        ):
            open_store(str(path))
    finally:
        holder.kill()
        holder.wait()
    with open_store(str(path)) as s:  # the lock dies with its process
        assert len(s) == 0


def test_read_only_directory_and_file(tmp_path: Path) -> None:
    """A clear error at open. Root ignores permissions, so as root the check runs with the
    permission-override capabilities dropped (util-linux's setpriv)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    with open_store(str(ro / "s.sqlite")) as s:
        s.add(A, "k")
    (ro / "s.sqlite.lock").unlink()
    code = (
        "import sys; from nearduppipe import open_store, StoreError\n"
        "try:\n    open_store(sys.argv[1])\nexcept StoreError as e:\n    print(e)\n"
    )
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permissions cannot be enforced")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
    ro.chmod(0o555)
    (ro / "s.sqlite").chmod(0o444)
    try:
        out = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(ro / "s.sqlite")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        ro.chmod(0o755)
    assert "not writable" in out.stdout, out.stdout + out.stderr


def test_text_samples_are_kept_with_entries_and_decisions(store: Store) -> None:
    assert store.check_and_add(A, "https://a/1", text="原文 original text") is None
    assert store.check_and_add(A ^ 1, "https://a/2", text="副本 copy") is not None
    store.add(A ^ 0xFF00, "https://a/3")  # no sample
    assert [e.text for e in store.entries()] == ["原文 original text", None]
    assert [d.text for d in store.decisions()] == ["副本 copy"]
    assert store.check_and_add(A ^ 2, "https://a/4", text="") is not None
    assert [d.text for d in store.decisions()] == ["副本 copy", ""]  # empty is not "none"
