"""Make the format-2 Redis store fixtures (``redis_format2.jsonl``, a single-node store, and
``redis_format2_cluster.jsonl``, a 4-shard Redis Cluster store) and their answers
(``*_answers.json``) with the format-2 store code (nearduppipe before format 3).

Kept so the fixture can be explained, not re-run: the point of the fixture is that it was
written by the previous release's code, so a later format can be checked to migrate it and
give the same answers (tests/stores/redis/test_redis_format3_fixture.py). Since the single-node store writes
format 3, re-making the single-node fixture needs the previous release's checkout (its
``RedisStore``); the Cluster store still writes format 2.

    python tests/data/redis_format2_make.py

The store (prefix ``f2fix``; the cluster's ``f2cfix``, 4 shards): the default rule (scope
``global``), no TTL, a fixed clock; 300 pages in 60 groups of near-copies over a few hosts
(URLs of 30-90 characters), stored by ``check`` (so near-copies become decisions), ``add``
(own ``stored_at``, some with a job, some without a wide fingerprint), a revisit with changed
fingerprints, and two removals.

The dump: one JSON object per Redis key of the store (the cluster's: its global keys and every
shard's), in key order:
``{"key": name, "type": "hash"|"list"|"string", "pttl": ms or -1, "value": ...}`` with every
byte string base64-encoded; a hash's value is a list of ``[field, value]`` pairs sorted by
field, a list's the items in order. Restoring it is plain ``HSET``/``RPUSH``/``SET`` (no
``DUMP`` payload: those are tied to a Redis version).

The answers: ``len``, ``counters``, ``entries`` (in stored order), ``decisions``, ``get`` of
some keys, ``near`` of some queries, then the verdicts of ``check`` calls made in order after
the other queries (they change the store, so they come last).
"""

from __future__ import annotations

import base64
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import redis  # noqa: E402

from nearduppipe.fingerprint.rule import Fingerprints, Rule  # noqa: E402
from nearduppipe.stores.redis.cluster import RedisClusterStore  # noqa: E402
from nearduppipe.stores.redis.cluster_open import shard_keys, shard_tags  # noqa: E402
from nearduppipe.stores.redis.store import RedisStore  # noqa: E402
from tests.support.redis_cluster import LocalCluster  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

PREFIX, CLUSTER_PREFIX = "f2fix", "f2cfix"
HOSTS = ("https://news.example.com/", "https://blog.example.org/posts/", "http://a.example/")


def flip(x: int, bits: list[int]) -> int:
    for b in bits:
        x ^= 1 << b
    return x


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def dump(client: Any, names: list[bytes]) -> list[dict[str, Any]]:
    """The keys ``names`` as JSON-able objects."""
    out = []
    for name in sorted(names):
        kind = client.type(name).decode()
        if kind == "hash":
            value: Any = sorted([b64(f), b64(v)] for f, v in client.hgetall(name).items())
        elif kind == "list":
            value = [b64(v) for v in client.lrange(name, 0, -1)]
        elif kind == "string":
            value = b64(client.get(name))
        else:
            raise SystemExit(f"{name!r}: a {kind} key, not in format 2")
        out.append({"key": name.decode(), "type": kind, "pttl": client.pttl(name), "value": value})
    return out


def entry_json(e: Any) -> list[Any]:
    return [
        e.key,
        f"{e.fingerprint:016x}",
        e.stored_at,
        e.text,
        None if e.wide is None else f"{e.wide:0128x}",
        e.job,
    ]


def main() -> None:
    make("single")
    make("cluster")


def make(kind: str) -> None:
    """``single``: a RedisStore (prefix ``f2fix``); ``cluster``: a RedisClusterStore of 4
    shards on a local 3-master cluster (prefix ``f2cfix``)."""
    prefix = PREFIX if kind == "single" else CLUSTER_PREFIX
    rng = random.Random(20261126)
    t = [1.8e9]

    def clock() -> float:
        t[0] += 1.0
        return t[0]

    pages = []  # (fps, key, text)
    for g in range(60):
        base, wide = rng.getrandbits(64), rng.getrandbits(512)
        host = HOSTS[g % len(HOSTS)]
        for c in range(5):
            fp = base if c == 0 else flip(base, rng.sample(range(64), rng.randint(1, 3)))
            w = wide if c == 0 else flip(wide, rng.sample(range(512), rng.randint(2, 20)))
            if c == 4 and g % 3 == 0:  # a far copy: same 64-bit bucket, wide too far
                w = flip(wide, rng.sample(range(512), 200))
            slug = "-".join(
                rng.choice(("storm", "vote", "city", "bank", "rates"))
                for _ in range(rng.randint(1, 9))
            )
            pages.append(
                (Fingerprints(fp, w), f"{host}{2020 + g % 6}/{g}/{c}/{slug}", f"text {g}.{c}")
            )
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "single":
            server: Any = RedisServer(Path(tmp)).start()
            client: Any = redis.Redis.from_url(server.url)
        else:
            server = LocalCluster(Path(tmp)).start()
            client = redis.RedisCluster(host="127.0.0.1", port=server.ports[0])

        def open_store(rule: Rule | None, **options: Any) -> Any:
            if kind == "single":
                return RedisStore(server.url, rule, prefix=prefix, clock=clock, **options)
            return RedisClusterStore(server.url, rule, prefix=prefix, clock=clock, **options)

        try:
            extra = {"shards": 4} if kind == "cluster" else {}
            store = open_store(Rule(), reset=True, **extra)
            for i, (fps, key, text) in enumerate(pages):
                if i % 7 == 3:
                    store.add(fps, key, text=text, job="job-a", stored_at=1.7e9 + i)
                elif i % 11 == 5:
                    store.add(fps.fp, key, stored_at=1.7e9 + i)  # no wide fingerprint
                else:
                    store.check(fps, key, text=text, job=None if i % 2 else "job-b")
            store.check(Fingerprints(pages[10][0].fp ^ 0xFF00, rng.getrandbits(512)), pages[10][1])
            store.remove(pages[20][1])
            store.remove(pages[41][1])
            store.close()
            if kind == "single":
                names = list(client.scan_iter(match="{" + prefix + "}:*"))
            else:
                tags = [prefix, *shard_tags(prefix, 4)]
                names = [n.encode() for t in tags for n in shard_keys(t) if client.exists(n)]
            records = dump(client, names)
            store = open_store(None, read_only=True)
            queries = [pages[i][0] for i in (0, 1, 20, 41, 77, 150, 299)]
            queries += [
                Fingerprints(flip(pages[i][0].fp, [5, 9]), flip(pages[i][0].wide or 0, [1, 2, 3]))
                for i in (30, 31, 200)
            ]
            queries.append(Fingerprints(rng.getrandbits(64), rng.getrandbits(512)))
            answers: dict[str, Any] = {
                "prefix": prefix,
                "kind": kind,
                "clock_after": t[0],
                "len": len(store),
                "counters": store.counters(),
                "entries": [entry_json(e) for e in store.entries()],
                "decisions": [
                    [
                        *d[:1],
                        f"{d.fingerprint:016x}",
                        d.matched_key,
                        f"{d.matched_fingerprint:016x}",
                        *d[4:],
                    ]
                    for d in store.decisions()
                ],
                "get": {
                    pages[i][1]: None if (e := store.get(pages[i][1])) is None else entry_json(e)
                    for i in (0, 3, 5, 10, 20, 41, 299)
                },
                "near": [
                    {
                        "fp": f"{q.fp:016x}",
                        "wide": f"{q.wide:0128x}",
                        "exclude": ex,
                        "matches": sorted(
                            [m.key, f"{m.fingerprint:016x}", m.distance, m.wide_distance]
                            for m in store.near(q, exclude=ex)
                        ),
                    }
                    for q, ex in zip(
                        queries,
                        [
                            None,
                            pages[1][1],
                            None,
                            None,
                            pages[77][1],
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                        ],
                        strict=True,
                    )
                ],
            }
            store.close()
            store = open_store(None)
            checks = []
            for q, key in [
                (pages[0][0], pages[0][1]),  # an unchanged revisit
                (
                    Fingerprints(flip(pages[50][0].fp, [0]), flip(pages[50][0].wide or 0, [7])),
                    "https://x.example/new-1",
                ),
                (
                    Fingerprints(rng.getrandbits(64), rng.getrandbits(512)),
                    "https://x.example/new-2",
                ),
                (pages[20][0], pages[20][1]),  # a removed key comes back
            ]:
                v = store.check(q, key, text="later")
                m = v.match
                checks.append(
                    {
                        "fp": f"{q.fp:016x}",
                        "wide": f"{q.wide:0128x}",
                        "key": key,
                        "status": v.status,
                        "match": None
                        if m is None
                        else [m.key, f"{m.fingerprint:016x}", m.distance, m.wide_distance],
                    }
                )
            answers["check"] = checks
            answers["len_after"] = len(store)
            store.close()
        finally:
            client.close()
            server.stop()
    name = "redis_format2" if kind == "single" else "redis_format2_cluster"
    with open(HERE / f"{name}.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    (HERE / f"{name}_answers.json").write_text(json.dumps(answers, indent=1) + "\n")
    print(f"{len(records)} keys, {answers['len']} entries, {len(answers['decisions'])} decisions")


if __name__ == "__main__":
    main()
