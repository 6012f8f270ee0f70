"""Two ``nearduppipe migrate`` runs on one format-2 store (issue 42, item 5): real processes
against a real redis-server, 200,000 entries (the size at which two runs at once left a log
from which a fresh client found near-copies of 107 of 1,000 sampled entries), then a fresh
client's ``near`` for a near-copy of each of 1,000 sampled entries must name it.

* started together: one runs, the other is refused with one line naming the first (or finds
  the store migrated, if it started after the first had finished);
* one killed (SIGKILL) half way while another waits for it (``--wait``): the waiting one takes
  the lock over and finishes, having moved exactly what the killed one had not;
* a lock held elsewhere (another host) is respected until it lapses, and a run that lost its
  lock has its next write refused (the fence).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import Entry, StoreError
from nearduppipe.stores.redis import keys as rk
from nearduppipe.stores.redis.migrate import migrate
from nearduppipe.stores.redis.store import RedisStore

from ..support.redis_format2 import write_format2
from ..support.redis_server import RedisServer

N = 200_000
SAMPLE = 1_000


def _fingerprints(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform 64-bit fingerprints and 512-bit wide ones (as 64 bytes each)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    return fps, rng.integers(0, 256, (n, 64), dtype=np.uint8)


def _key(i: int) -> str:
    return f"https://seed.example/{i}/2026/11/article"


def _entries(fps: np.ndarray, wides: np.ndarray) -> Iterator[Entry]:
    for i in range(len(fps)):
        fp = int.from_bytes(fps[i].tobytes(), "little")
        wide = int.from_bytes(wides[i].tobytes(), "little")
        yield Entry(_key(i), fp, 1.7e9 + i, None, wide, "seed")


def _near_copy(fp: bytes, wide: bytes, rng: np.random.Generator) -> Fingerprints:
    """The fingerprints of a near-copy: 2 of the 64 bits and 8 of the 512 wide bits flipped
    (well within the default rule's radius 8 and wide threshold)."""
    a = int.from_bytes(fp, "little")
    for bit in rng.choice(64, 2, replace=False):
        a ^= 1 << int(bit)
    b = int.from_bytes(wide, "little")
    for bit in rng.choice(512, 8, replace=False):
        b ^= 1 << int(bit)
    return Fingerprints(a, b)


def found_near_copies(url: str, prefix: str, fps: np.ndarray, wides: np.ndarray) -> int:
    """How many of ``SAMPLE`` sampled entries a fresh read-only client finds as the nearest
    match of a near-copy of each (what a crawl's check would decide)."""
    rng = np.random.default_rng(11)
    sample = rng.choice(len(fps), SAMPLE, replace=False)
    with RedisStore(url, prefix=prefix, read_only=True) as store:
        found = 0
        for i in sample:
            copy = _near_copy(fps[i].tobytes(), wides[i].tobytes(), rng)
            found += any(m.key == _key(int(i)) for m in store.near(copy))
    return found


@pytest.fixture
def format2_store(server: RedisServer) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """A format-2 store of ``N`` entries at prefix ``race`` on the test's own server: its URL
    (with the prefix) and the fingerprints stored."""
    fps, wides = _fingerprints(N)
    client = redis.Redis.from_url(server.url)
    try:
        assert write_format2(client, "race", _entries(fps, wides)) == N
        assert client.hget("{race}:meta", "format") == b"2"
    finally:
        client.close()
    join = "&" if "?" in server.url else "?"
    yield f"{server.url}{join}prefix=race", fps, wides


def _migrate_cmd(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nearduppipe.cli", "migrate", url, *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _assert_migrated(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        meta = client.hgetall("{race}:meta")
        assert meta[b"format"] == b"3" and b"migrating" not in meta
        assert int(meta[b"live"]) == N
        assert client.llen("{race}:n") == N
        assert not client.exists("{race}:e", "{race}:k", "{race}:c", "{race}:l")
    finally:
        client.close()


def test_two_migrations_started_together_leave_every_entry_findable(
    server: RedisServer, format2_store: tuple[str, np.ndarray, np.ndarray]
) -> None:
    """Two ``nearduppipe migrate`` processes started at once: one migrates; the other is
    refused (exit 2, one line naming the first's pid), or, started after the first finished,
    finds format 3 and moves nothing. Then a fresh client finds every sampled entry."""
    url, fps, wides = format2_store
    procs = [
        subprocess.Popen(_migrate_cmd(url), env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=110) for p in procs]
    codes = [p.returncode for p in procs]
    found = found_near_copies(url, "race", fps, wides)  # (the symptom first: the old code's 107)
    assert found == SAMPLE, (found, codes, outs)
    assert sorted(codes) in ([0, 0], [0, 2]), (codes, outs)
    moved = sorted(int(out.split("(")[1].split()[0]) for out, _ in outs if out)
    assert moved in ([N], [0, N]), outs
    for i, (out, err) in enumerate(outs):
        if codes[i] == 2:
            other = procs[1 - i].pid
            assert out == "" and len(err.splitlines()) == 1, err
            assert f"another migration is running (pid {other} on " in err, err
            assert "Traceback" not in err
    _assert_migrated(server)


def test_a_migration_killed_half_way_while_another_waits_leaves_every_entry_findable(
    server: RedisServer, format2_store: tuple[str, np.ndarray, np.ndarray]
) -> None:
    """A migration SIGKILLed once it moved a quarter of the store, while a second one
    (``--wait``) waits for it: the second takes over the dead one's lock at once (same host,
    its pid gone), moves exactly the rest, and every sampled entry is then found."""
    url, fps, wides = format2_store
    client = redis.Redis.from_url(server.url)
    started = []  # (ended below, whatever fails)
    try:
        first = subprocess.Popen(_migrate_cmd(url, "--batch", "500", "--pause", "0.01"), env=_env())
        started.append(first)
        deadline = time.monotonic() + 60
        while int(client.hget("{race}:meta", "live") or 0) < N // 4:
            assert first.poll() is None and time.monotonic() < deadline, "no quarter moved"
            time.sleep(0.01)
        # (stopped while the second starts: on a fast machine it could otherwise finish first)
        first.send_signal(signal.SIGSTOP)
        second = subprocess.Popen(_migrate_cmd(url, "--wait"), env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        started.append(second)
        assert second.stderr is not None
        waiting = second.stderr.readline()  # (the line it prints once it waits)
        assert f"another migration is running (pid {first.pid} on " in waiting, waiting
        assert first.poll() is None, "the first migration ended before it was killed"
        first.send_signal(signal.SIGKILL)  # (a stopped process dies of SIGKILL too)
        first.wait()
        half = int(client.hget("{race}:meta", "live") or 0)
        assert N // 4 <= half < N and client.hget("{race}:meta", "migrating") == b"2"
        out, err = second.communicate(timeout=100)
        assert second.returncode == 0, err
        assert f"({N - half} entries moved by this run)" in out
        assert "is no longer running; took the lock over" in err
    finally:
        client.close()
        for proc in started:  # (a failed assertion would leave the first stopped for good)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    _assert_migrated(server)
    assert found_near_copies(url, "race", fps, wides) == SAMPLE


def _small_format2(server: RedisServer, prefix: str, n: int = 300) -> str:
    fps, wides = _fingerprints(n, seed=3)
    client = redis.Redis.from_url(server.url)
    try:
        write_format2(client, prefix, _entries(fps, wides))
    finally:
        client.close()
    join = "&" if "?" in server.url else "?"
    return f"{server.url}{join}prefix={prefix}"


def test_a_lock_held_on_another_host_is_respected_until_it_lapses(server: RedisServer) -> None:
    """A lock whose holder is elsewhere (its pid cannot be checked here): refused, naming it,
    nothing written; ``wait`` waits for it to lapse (1 s after the run says it waits, here)
    and then migrates."""
    from nearduppipe.stores.redis.migrate_lock import Holder

    url = _small_format2(server, "elsewhere")
    client = redis.Redis.from_url(server.url)
    try:
        other = Holder("build-host-7", 4242, time.time() - 90, "f" * 16)
        client.set("{elsewhere}:l", other.value(), px=60_000)  # (shortened below)
        with pytest.raises(StoreError, match=r"another migration is running \(pid 4242 on "
                           r"build-host-7, started .* \(90 s ago\)"):  # fmt: skip
            migrate(url)
        assert client.hget("{elsewhere}:meta", "format") == b"2"  # nothing written
        told: list[str] = []
        shortened: list[float] = []

        def on_wait(line: str) -> None:  # (the lock lapses 1 s after the run began to wait)
            told.append(line)
            client.pexpire("{elsewhere}:l", 1000)
            shortened.append(time.monotonic())

        assert migrate(url, wait=True, on_wait=on_wait) == 300
        assert 0.95 <= time.monotonic() - shortened[0] < 20
        assert len(told) == 1 and "pid 4242 on build-host-7" in told[0]
        assert client.hget("{elsewhere}:meta", "format") == b"3"
        assert not client.exists("{elsewhere}:l")  # released
    finally:
        client.close()


def test_a_migration_that_lost_its_lock_writes_nothing_more(server: RedisServer) -> None:
    """The fence: a run whose lock lapsed (paused past its expiry, its renewal stopped) and
    was taken by another run has its next write refused by the script itself."""
    from nearduppipe.stores.redis.migrate import _MOVE_LUA, fenced
    from nearduppipe.stores.redis.migrate_lock import Holder, MigrationLock

    _small_format2(server, "fence")
    client = redis.Redis.from_url(server.url)
    try:
        paused = MigrationLock(client, "{fence}:l", "here", ttl=0.5, renew=3600)
        paused.acquire()
        time.sleep(0.8)  # (no renewal within the expiry: the lock lapses)
        taker = MigrationLock(client, "{fence}:l", "here", ttl=30)
        taker.acquire()
        move = fenced(client, _MOVE_LUA, paused, rk.key("fence", "l"))
        client.hset("{fence}:meta", "migrating", "2")
        keys = [rk.key("fence", n) for n in ("meta", "e", "k")]
        with pytest.raises(redis.ResponseError, match="NEARDUP_MIGRATE_LOCK_LOST"):
            move(keys=keys, args=["0"])
        assert client.hget("{fence}:meta", "migrate_cursor") is None  # nothing written
        assert int(fenced(client, _MOVE_LUA, taker, rk.key("fence", "l"))(keys, ["0"])) == 0
        paused.release()  # (leaves the taker's lock alone)
        assert Holder.parse(client.get("{fence}:l")) == taker.holder
        taker.release()
        assert not client.exists("{fence}:l")
    finally:
        client.close()
