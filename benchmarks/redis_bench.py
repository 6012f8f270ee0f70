"""Redis store (format 3) at scale: import rate, memory per entry, and checks per second from 1
and 8 client processes against a loopback redis-server holding N entries, next to the floor of
a plain ``SET`` round trip from the same kind of client in the same run (medians of --runs).
Every worker opens its store and reads the log into its index before a barrier; the timed
part is the checks only (the load time and the index size are printed apart).

    python benchmarks/redis_bench.py [--n 1000000] [--calls 4000] [--runs 3]
        [--kind uniform|clustered|text] [--text-file FILE.npy] [--blocks 3] [--procs 1,8]
        [--copy] [--key-length N] [--listpack-value 256]

``--key-length N`` stores page keys of N characters (an article URL's path padded with a slug;
default: ``https://seed.example/<i>``, 21-27 characters). Format 3 keeps a page key once, as
(host prefix id, rest of the URL), in its entry's record; memory per entry still grows with
the rest. ``--listpack-value`` sets the server's ``hash-max-listpack-value`` before the import,
as the store advises at open (0: leave Redis's default, 64, under which every bucket becomes a
hash table: ~1.4x the memory).

``--copy`` also times ``nearduppipe copy`` of the whole store to another prefix (the CLI: it
reads every record, then imports them pipelined).

``clustered`` fingerprints are text-like: every bit has its own probability of being set, drawn
from 0.15-0.85, so buckets are uneven (the uniform case is the easy one). ``text``: 64-bit
SimHashes of synthetic pages from ``--text-file`` (``_common.fingerprints``; generated and
saved there when absent), with uniform 512-bit fingerprints.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import redis
from _common import fingerprints, text_sample

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.rule import Fingerprints, Rule  # noqa: E402
from nearduppipe.stores.base import Entry  # noqa: E402
from nearduppipe.stores.redis.store import RedisStore  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

PREFIX = "bench"
CALLS = ("fcall", "evalsha")  # the commands a check is sent as
TEXT_ENV = "NEARDUP_BENCH_TEXT"  # --kind text: "file:stored", for the spawned workers
CPU: list[float] = []  # per run: median client CPU seconds per call (user + system)
LOADS: list[tuple[float, int]] = []  # per check run: median log-load seconds, index bytes


def _layout(layout: Any) -> str:
    if layout.blocks is None:
        return "index: a table set per run by its size"
    return f"blocks={layout.n_blocks} ({len(layout.tables())} tables, probe radius {layout.probe})"


def _bits(rng: np.random.Generator, n: int, p: np.ndarray) -> list[int]:
    """``n`` integers of ``len(p)`` bits, bit i set with probability p[i]."""
    on = rng.random((n, len(p))) < p
    packed = np.packbits(on, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def pages(kind: str, seed: int, n: int, chunk: int = 50_000) -> Iterator[Fingerprints]:
    """Seed 1: the stored pages; other seeds: new pages of the same kind."""
    prob = np.random.default_rng(12345)  # one "language": the same bit biases everywhere
    p64, p512 = prob.uniform(0.15, 0.85, 64), prob.uniform(0.15, 0.85, 512)
    if kind in ("uniform", "text"):
        p64, p512 = np.full(64, 0.5), np.full(512, 0.5)
    rng = np.random.default_rng(seed)
    text = None
    if kind == "text":  # 64-bit fingerprints from --text-file (set in TEXT_ENV by main)
        path, stored = os.environ[TEXT_ENV].rsplit(":", 1)
        text = text_sample(path, int(stored), seed, n)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        fps = _bits(rng, m, p64) if text is None else text[start : start + m]
        yield from map(Fingerprints, fps, _bits(rng, m, p512))


def seed_entries(n: int, key_length: int) -> Iterator[Entry]:
    """``n`` entries of uniform pages under ``key_length``-character keys, job "seed": what the
    migration benchmarks store, in the earlier format and in format 3."""
    return (
        Entry(page_key(i, key_length), f.fp, 1.7e9 + i, None, f.wide, "seed")
        for i, f in enumerate(pages("uniform", 1, n))
    )


def page_key(i: int, length: int | None) -> str:
    """The ``i``-th stored page's key: ``length`` characters when given (at least the short
    form's), like ``https://seed.example/<i>/2026/11/article-slug-...``."""
    short = f"https://seed.example/{i}"
    if length is None:
        return short
    return (short + "/2026/11/" + "article-slug-" * (length // 13 + 1))[: max(length, len(short))]


def _set_worker(url: str, n: int, seed: int, kind: str, barrier: Any, out: Any, info: Any) -> None:
    client = redis.Redis.from_url(url)
    client.ping()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        client.set(f"benchset:{seed}:{i}", "x")
    out.put((n / (time.perf_counter() - t0), (time.process_time() - c0) / n))


def _check_worker(
    url: str, n: int, seed: int, kind: str, barrier: Any, out: Any, info: Any
) -> None:
    fps = list(pages(kind, seed, n))
    t0 = time.perf_counter()
    store = RedisStore(url, prefix=PREFIX)
    store.near(fps[0])  # reads the log into this client's index
    info.put((time.perf_counter() - t0, store._log.nbytes))
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for i, f in enumerate(fps):
        store.check(f, f"https://w{seed}.example/{i}")
    out.put((n / (time.perf_counter() - t0), (time.process_time() - c0) / n))
    store.close()


def rate(
    target: Callable[..., None],
    url: str,
    procs: int,
    calls: int,
    args: argparse.Namespace,
    seed: int,
) -> float:
    ctx = multiprocessing.get_context("spawn")
    out, info, barrier = ctx.Queue(), ctx.Queue(), ctx.Barrier(procs)
    ps = [
        ctx.Process(
            target=target, args=(url, calls // procs, seed + i, args.kind, barrier, out, info)
        )
        for i in range(procs)
    ]
    for p in ps:
        p.start()
    results = [out.get(timeout=1800) for _ in ps]
    rates = [r for r, _ in results]
    CPU.append(statistics.median(c for _, c in results))
    for p in ps:
        p.join()
    if target is _check_worker:
        loads = [info.get() for _ in ps]
        LOADS.append((statistics.median(t for t, _ in loads), max(b for _, b in loads)))
    return float(sum(rates))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kind", choices=("uniform", "clustered", "text"), default="clustered")
    ap.add_argument("--text-file", default=None)
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--procs", default="1,8")
    ap.add_argument("--copy", action="store_true")
    ap.add_argument("--key-length", type=int, default=None)
    ap.add_argument("--listpack-value", type=int, default=256)
    args = ap.parse_args()
    if args.kind == "text":
        if not args.text_file:
            ap.error("--kind text needs --text-file (generated there when absent)")
        need = args.n + 10 * args.calls  # new pages: sampled from after the stored ones
        fingerprints("text", np.random.default_rng(need), need, args.text_file)
        os.environ[TEXT_ENV] = f"{args.text_file}:{args.n}"  # (spawned workers inherit it)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        client = redis.Redis.from_url(server.url)
        try:
            if args.listpack_value:
                client.config_set("hash-max-listpack-value", args.listpack_value)
            base = client.info("memory")["used_memory"]
            store = RedisStore(server.url, Rule(), prefix=PREFIX, reset=True, blocks=args.blocks)
            t0 = time.perf_counter()
            store.import_records(
                (
                    Entry(page_key(i, args.key_length), f.fp, 1.7e9 + i, None, f.wide, "seed")
                    for i, f in enumerate(pages(args.kind, 1, args.n))
                ),
                [],
            )
            took = time.perf_counter() - t0
            held = len(store)
            used = client.info("memory")["used_memory"] - base
            # what is stored per entry, raw: fingerprint 8, wide 64, entry id 8, time 8, the
            # page key (median length) and the job
            raw = 8 + 64 + 8 + 8 + len(page_key(args.n // 2, args.key_length)) + 4
            print(f"{args.kind}, {_layout(store.layout)}, rule {store.rule.describe()}")
            print(f"page keys like {page_key(args.n // 2, args.key_length)!r}")
            limits = {**client.config_get("hash-max-listpack-*")}
            bucket = "{" + PREFIX + "}:b8000"
            print(
                f"server {limits}; a bucket's encoding: {client.object('encoding', bucket)!r}, "
                f"{client.hlen(bucket)} entries"
            )
            print(
                f"imported {held:,} entries in {took:.1f} s ({held / took:,.0f}/s); redis "
                f"used_memory +{used / 1e6:.0f} MB = {used / held:.0f} B/entry "
                f"({used / held / raw:.1f}x the {raw} raw bytes of an entry; "
                f"{used / held / (8 + 64 + 8):.1f}x fingerprint + wide + id)"
            )
            store.close()
            if args.copy:
                cli = [sys.executable, "-m", "nearduppipe.cli", "copy"]
                t0 = time.perf_counter()
                subprocess.run(
                    [*cli, f"{server.url}?prefix={PREFIX}", f"{server.url}?prefix=benchcopy"],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                took = time.perf_counter() - t0
                print(f"nearduppipe copy of {held:,} entries to another prefix: {took:.1f} s")
                RedisStore(server.url, prefix="benchcopy", reset=True).close()
            for procs in map(int, args.procs.split(",")):
                ours, floor, server_us, set_cpu, check_cpu = [], [], [], [], []
                LOADS.clear()
                for run in range(args.runs):
                    seed = 1000 * (run + 1) + 100 * procs
                    floor.append(rate(_set_worker, server.url, procs, args.calls, args, seed))
                    set_cpu.append(CPU[-1])
                    client.config_resetstat()
                    ours.append(rate(_check_worker, server.url, procs, args.calls, args, seed))
                    check_cpu.append(CPU[-1])
                    # server time per check: what the server can sustain, less sensitive than
                    # wall-clock rates to other load on the machine
                    # (FCALL on Redis 7, EVALSHA before: the store's function library or script)
                    stats = client.info("commandstats")
                    usec = sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in CALLS)
                    server_us.append(usec / (args.calls // procs * procs))
                o, f = statistics.median(ours), statistics.median(floor)
                print(
                    f"{procs} client process(es): check {o:,.0f}/s, plain SET {f:,.0f}/s -> "
                    f"{o / f:.2f}x the SET floor (median of {args.runs}; checks "
                    f"{', '.join(f'{x:,.0f}' for x in ours)}); server "
                    f"{statistics.median(server_us):,.0f} us per check; each client read the log "
                    f"in {statistics.median(t for t, _ in LOADS):.1f} s into an index of "
                    f"{max(b for _, b in LOADS) / 1e6:.0f} MB"
                )
                cc, sc = statistics.median(check_cpu) * 1e6, statistics.median(set_cpu) * 1e6
                su = statistics.median(server_us)
                print(
                    f"  by CPU time (less sensitive to other load): a check costs {cc:,.0f} us in "
                    f"its client + {su:,.0f} us in the server, a SET {sc:,.0f} us in its client"
                )
        finally:
            client.close()
            server.stop()


if __name__ == "__main__":
    main()
