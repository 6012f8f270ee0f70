"""Model check: random operation sequences applied to :class:`MemoryStore` (the reference
semantics) and to the Redis store with the same clock must give identical verdicts, matches,
entries, decisions and counters."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.base import Decision, Entry
from nearduppipe.stores.memory import MemoryStore
from nearduppipe.stores.redis.store import RedisStore

from ...support.redis_server import RedisServer, redis_major

# bits next to the block boundaries of the 3-block layout (64 = 22 + 21 + 21) and the ends
EDGES = [0, 1, 20, 21, 22, 41, 42, 43, 62, 63]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.25

    def __call__(self) -> float:
        return self.now


class Pages:
    """Fingerprints like text's: bit probabilities drawn from 0.15-0.85 (clustered), some
    uniform, variants a few bits away (often at block edges), some without a wide print."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        nprng = np.random.default_rng(rng.randrange(1 << 30))
        self.p64 = nprng.uniform(0.15, 0.85, 64)
        self.p512 = nprng.uniform(0.15, 0.85, 512)
        self.nprng = nprng
        self.seen: list[Fingerprints] = []

    def _bits(self, p: np.ndarray) -> int:
        on = np.flatnonzero(self.nprng.random(len(p)) < p)
        return sum(1 << int(i) for i in on)

    def _flip(self, x: int, n: int, width: int, edges: bool) -> int:
        pool = EDGES if edges and width == 64 else range(width)
        for b in self.rng.sample(list(pool), min(n, len(pool))):
            x ^= 1 << b
        return x

    def fresh(self) -> Fingerprints:
        r = self.rng.random()
        if r < 0.5:
            fp, wide = self._bits(self.p64), self._bits(self.p512)
        else:
            fp, wide = self.rng.getrandbits(64), self.rng.getrandbits(512)
        return Fingerprints(fp, None if self.rng.random() < 0.15 else wide)

    def variant(self, base: Fingerprints) -> Fingerprints:
        rng = self.rng
        if rng.random() < 0.1:  # the same block, the rest random: same bucket, far away
            keep = rng.choice([0xFFFFFC0000000000, 0x3FFFFE00000, 0x1FFFFF])
            fp = (base.fp & keep) | (rng.getrandbits(64) & ~keep)
            return Fingerprints(fp, base.wide)
        n64 = rng.choice([0, 1, 2, 3, 4, 6, 7, 8, 8, 9, 10, 12])
        fp = self._flip(base.fp, n64, 64, edges=rng.random() < 0.4)
        wide = base.wide
        if wide is not None:
            wide = self._flip(wide, rng.choice([0, 5, 30, 55, 60, 61, 62, 63, 70, 120]), 512, False)
        if rng.random() < 0.1:
            wide = None if wide is not None else rng.getrandbits(512)
        return Fingerprints(fp, wide)

    def small_edit(self, fps: Fingerprints) -> Fingerprints:
        wide = fps.wide
        if wide is not None:
            wide = self._flip(wide, self.rng.choice([0, 3, 20, 61, 62]), 512, False)
        return Fingerprints(self._flip(fps.fp, self.rng.choice([0, 1, 2, 4]), 64, False), wide)

    def pick(self) -> Fingerprints:
        if self.seen and self.rng.random() < 0.7:
            fps = self.variant(self.rng.choice(self.seen))
        else:
            fps = self.fresh()
        self.seen.append(fps)
        if len(self.seen) > 400:
            self.seen.pop(0)
        return fps


def _young(entries: list[Entry], now: float, ttl: float | None) -> list[Entry]:
    # The Redis store deletes entries older than 2 * ttl; the memory store keeps them.
    return [e for e in entries if ttl is None or e.stored_at >= now - 2 * ttl]


CASES = [
    pytest.param(Rule(), None, None, 1, False, id="default-rule"),
    pytest.param(Rule(), 40.0, None, 2, False, id="default-rule-ttl"),
    pytest.param(Rule.paper(3), None, None, 3, False, id="paper-rule"),
    pytest.param(Rule(), None, 4, 6, False, id="default-rule-4-blocks"),
    pytest.param(
        Rule(similarity=0.9, radius=6, legacy_distance=4),
        None,
        7,
        4,
        False,
        id="radius6-7blocks-exact",
    ),
    # the same Lua as a script (EVALSHA), on a server without function libraries (Redis 6.2)
    pytest.param(Rule(), 40.0, None, 8, True, id="default-rule-ttl-redis6-script"),
]


@pytest.mark.parametrize(("rule", "ttl", "blocks", "seed", "redis6"), CASES)
def test_redis_store_behaves_like_memory_store(
    request: pytest.FixtureRequest,
    rule: Rule,
    ttl: float | None,
    blocks: int | None,
    seed: int,
    redis6: bool,
) -> None:
    redis_server: RedisServer = request.getfixturevalue(
        "redis6_server" if redis6 else "redis_server"
    )
    assert not redis6 or redis_major(redis_server.url) == 6
    functions = redis_major(redis_server.url) >= 7
    rng = random.Random(seed)
    clock = Clock()
    pages = Pages(rng)
    prefix = f"test:model:{seed}"
    opts = {"ttl": ttl, "max_decisions": 150, "clock": clock, "blocks": blocks}
    mem = MemoryStore(rule=rule, **opts)  # type: ignore[arg-type]
    red = RedisStore(redis_server.url, rule, prefix=prefix, reset=True, **opts)  # type: ignore[arg-type]
    # a second client of the same store: its writes reach red's index only through the log
    # (the members logged since red's position), and its compactions make red reload it
    other = RedisStore(redis_server.url, prefix=prefix, **opts)  # type: ignore[arg-type]
    keys = [f"https://example.com/{i}" for i in range(250)] + ["ü/例子 ?*[x]"]
    jobs = [None, None, "job-1", "job-2", "job-3"]
    statuses: dict[str, int] = {}
    compactions = 0
    try:
        for step in range(3200):
            clock.now += rng.choice([0.0, 0.001, 0.5, 1.0, 3.0])
            op = rng.random()
            key = rng.choice(keys)
            if op < 0.62:
                fps = pages.pick()
                own = mem.get(key)
                if own is not None and rng.random() < 0.3:  # a revisit with a small edit
                    fps = pages.small_edit(own.fingerprints)
                job, text = rng.choice(jobs), rng.choice([None, "", "某 text \ud800"])
                got, want = (
                    red.check(fps, key, text=text, job=job),
                    mem.check(fps, key, text=text, job=job),
                )
                assert got == want, (step, fps, key)
                statuses[got.status] = statuses.get(got.status, 0) + 1
            elif op < 0.70:
                fps = pages.pick()
                at = rng.choice([None, clock.now - 5.0])
                rng.choice([red, other]).add(fps, key, job="imp", text="t", stored_at=at)
                mem.add(fps, key, job="imp", text="t", stored_at=at)
            elif op < 0.76:
                old = mem.get(key)
                got_removed, want_removed = rng.choice([red, other]).remove(key), mem.remove(key)
                if old is None or ttl is None or old.stored_at >= clock.now - 2 * ttl:
                    assert got_removed == want_removed
            elif op < 0.82:
                want_entry = mem.get(key)
                if want_entry is None or ttl is None or want_entry.stored_at >= clock.now - 2 * ttl:
                    assert red.get(key) == want_entry
            elif op < 0.97:
                fps = pages.pick()
                exclude = rng.choice([None, key])
                assert red.near(fps, exclude=exclude) == mem.near(fps, exclude=exclude), step
            elif op < 0.975:
                red.close()
                red = RedisStore(redis_server.url, prefix=prefix, **opts)  # type: ignore[arg-type]
                assert red.rule == rule
            if step % 800 == 500:
                compactions += other.compact()
            if step % 400 == 399 or step == 3199:
                assert _young(list(red.entries()), clock.now, ttl) == _young(
                    list(mem.entries()), clock.now, ttl
                )
                assert list(red.decisions()) == list(mem.decisions())
                assert red.counters() == mem.counters()
                if ttl is None:
                    assert len(red) == len(mem)
        if ttl is not None:
            assert red.prune() > 0 and mem.prune() > 0
            assert list(red.entries()) == list(mem.entries())
            assert len(red) == len(mem)
        # the hot calls went to the function library where the server has them
        assert red._shard.wire.functions is functions
    finally:
        red.close()
        other.close()
    # the sequence exercised every outcome
    assert set(statuses) == {"new", "duplicate", "unchanged", "changed", "again"}, statuses
    assert statuses["duplicate"] > 30
    assert compactions >= 3  # the log lost its removed members while red searched it


def test_import_matches_memory_store(redis_server: RedisServer) -> None:
    """Batches of new keys take the bulk path; a batch with a stored or repeated key goes one
    by one (a later entry for a key replaces the earlier one)."""
    rng = random.Random(5)
    pages = Pages(rng)
    entries = []
    for i in range(2500):
        fps = pages.pick()
        key = f"k{i}" if i < 1200 else f"k{rng.randrange(2000)}"  # new keys, then repeats
        text, job = rng.choice([None, "t"]), rng.choice([None, "j"])
        entries.append(Entry(key, fps.fp, 1000.0 + i, text, fps.wide, job))
    decisions = [Decision(f"d{i}", i, f"k{i}", i + 1, 1, 5.0 + i, None, 3) for i in range(700)]
    mem = MemoryStore(max_decisions=500)
    mem.import_records(entries[:1200], decisions)
    mem.import_records(entries[1200:], [])
    with RedisStore(redis_server.url, prefix="test:import", reset=True, max_decisions=500) as red:
        assert red.import_records(entries[:1200], decisions) == 1200
        red.import_records(entries[1200:], [])
        assert list(red.entries()) == list(mem.entries())
        assert list(red.decisions()) == list(mem.decisions())
        assert red.counters() == mem.counters()
        for e in entries[::50]:
            assert red.near(e.fingerprints, exclude=e.key) == mem.near(
                e.fingerprints, exclude=e.key
            )
