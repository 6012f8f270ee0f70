"""What aliases cost on a Redis Cluster store: racing processes with and without them, and one
client's checks of pages found directly, through an alias, or not at all.

    python benchmarks/cluster_aliases.py [--rounds 3] [--groups 1000] [--distinct 6000]
        [--procs 8] [--n 20000] [--calls 1000] [--no-race]

One 3-master loopback cluster. The race (tests/support/cluster_race.py: every process checks
one page of each near-duplicate group at the same time, and distinct pages between) runs with
aliases and without, alternating, ``--rounds`` times; a check with aliases waits for every
earlier near check, not only until one is kept, and looks again when one it waited for was
dropped (cluster_check.py), so only near-duplicate races pay. Then one client: ``--n``
stored pages, each with an alias (a dropped copy), ``--calls`` checks of each kind, and the
same copies on a store of the same pages without aliases (the floor): a page near an alias
costs a read of its kept page's shard. Medians; ratios against the same run's floor.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.rule import Fingerprints, Rule  # noqa: E402
from nearduppipe.stores.base import Alias, Entry  # noqa: E402
from nearduppipe.stores.redis.cluster import RedisClusterStore  # noqa: E402
from tests.support.cluster_race import run_race  # noqa: E402
from tests.support.redis_cluster import LocalCluster  # noqa: E402


def flip(x: int, bits: int, n: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


def race(url: str, args: argparse.Namespace) -> None:
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        for aliases in (False, True):
            got = run_race(
                url, f"bench:race:{r}:{aliases}", args.groups, args.distinct, args.procs,
                rule=Rule(aliases=aliases),
            )  # fmt: skip
            ok = got["groups_kept_once"] == args.groups and got["distinct_kept"] == args.distinct
            rates[aliases].append(got["checks"] / got["seconds"])
            print(f"round {r} aliases={aliases}: {rates[aliases][-1]:,.0f} checks/s, exact: {ok}")
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"race, {args.procs} processes: without aliases {off:,.0f} checks/s, with {on:,.0f}"
          f" ({on / off:.2f}x)")  # fmt: skip


def single(url: str, args: argparse.Namespace) -> None:
    rng = random.Random(7)
    rule = Rule(aliases=True)
    store = RedisClusterStore(url, rule, prefix="bench:one", reset=True)
    kept = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(args.n)]
    store.import_records(
        (Entry(f"https://k.example/{i}", f.fp, 1.7e9, None, f.wide) for i, f in enumerate(kept)),
        [],
    )
    # each kept page's alias: 3 bits and 40 wide bits away (near it, and the probes below
    # near the alias but not the kept page)
    dropped = [Fingerprints(flip(f.fp, 64, 3, rng), flip(f.wide or 0, 512, 40, rng)) for f in kept]
    store.import_aliases(
        Alias(f"https://d.example/{i}", f.fp, 1.7e9, f"https://k.example/{i}", f.wide)
        for i, f in enumerate(dropped)
    )
    plain = RedisClusterStore(url, Rule(), prefix="bench:plain", reset=True)  # (no aliases)
    plain.import_records(
        (Entry(f"https://k.example/{i}", f.fp, 1.7e9, None, f.wide) for i, f in enumerate(kept)),
        [],
    )
    copies = [(kept[i], 2, 20) for i in range(args.calls)]
    probes = {
        "a copy of a kept page, no aliases": (plain, copies),
        "a copy of a kept page": (store, copies),
        "a copy of a dropped page": (store, [(dropped[i], 3, 24) for i in range(args.calls)]),
        "a new page": (store, [None] * args.calls),
    }
    store.near(Fingerprints(0, 0))  # (the logs read first)
    plain.near(Fingerprints(0, 0))
    times: dict[str, list[float]] = {k: [] for k in probes}
    for r in range(args.rounds):
        for kind, (target, items) in probes.items():
            found = 0
            t0 = time.perf_counter()
            for j, item in enumerate(items):
                if item is None:
                    f = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
                else:
                    base, b64, bw = item
                    f = Fingerprints(
                        flip(base.fp, 64, b64, rng), flip(base.wide or 0, 512, bw, rng)
                    )
                v = target.check(f, f"https://p.example/{len(kind)}/{r}/{j}")
                found += v.status == "duplicate"
            times[kind].append((time.perf_counter() - t0) / len(items) * 1e6)
            print(f"  {kind}: {times[kind][-1]:.0f} us per check, {found} of {len(items)} dropped")
    floor = statistics.median(times["a copy of a kept page, no aliases"])
    for kind, ts in times.items():
        t = statistics.median(ts)
        print(f"{kind}: {t:.0f} us per check ({t / floor:.2f}x a copy without aliases)")
    store.close()
    plain.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--distinct", type=int, default=6000)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--no-race", action="store_true", help="only the one client's checks")
    args = p.parse_args()
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="cluster-aliases-"))).start()
    try:
        if not args.no_race:
            race(cluster.url, args)
        single(cluster.url, args)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
