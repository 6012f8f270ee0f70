"""What aliases (``Rule(aliases=True)``, docs/verdicts.md "Aliases") cost: store-check CPU and
bytes per page on the memory store, the sqlite store, a single-node Redis and a 3-master Redis
Cluster (``--backends …,cluster``: its masters' used_memory and CPU summed), with aliases off
(the floor) and on, in the same run, alternating off, on, off, on, ... (medians of --runs).

    python benchmarks/alias_cost.py [--groups 16000] [--copies 4] [--fresh 0.25] [--runs 3]
        [--chain-wide 40] [--max-decisions 1] [--backends memory,sqlite,redis[,cluster]]

Workload (the same pages in every run, in one random order that keeps each group's order):
--groups groups, each a kept page then --copies copies, 3 of 64 bits and 30 of 512 bits
flipped; even copies from the original, odd ones from the copy before (copies of copies, 3 and
--chain-wide bits more: past the verdict's 512-bit bound from the original, mostly, and within
the alias bound, so only an alias of the dropped copy finds them); plus --fresh unrelated pages
per group, interleaved. Keys are article URLs on 50 hosts, a copy's with ``?utm_source=copyN``.

Per page checked (``check_and_add``): CPU is ``time.process_time`` of this process (all
threads: sqlite's writer too) over the loop and a flush; for Redis also the wall time and the
server's CPU (INFO cpu, used_cpu_user + used_cpu_sys delta). Bytes: sqlite, the file and its
-wal after close (the index snapshot included); Redis, INFO memory used_memory after the loop
minus before the open (on a flushed server); memory store, after the loop minus before the
open (store still open), tracemalloc's *current* traced size (Python objects, numpy's own
arrays) plus the pages allocated to the memory files (memfd) that hold the index's and the
store's columns, which tracemalloc does not see: in one extra traced pass per setting, after
the timed runs (tracemalloc slows the interpreter; a fixed workload's bytes do not vary). The
decision log is capped at --max-decisions (default 1, as a long crawl's log sits at its cap), so
the bytes are entries, aliases and keys, not the extra decisions of the extra drops. "B/alias"
is (on - off) bytes over the records (kept + aliases) the index holds more with aliases: the
pages dropped without them (a copy of a copy dropped only with aliases is an entry off, an
alias on). The redis-server is started here (tests/support/redis_server.py: its own loopback
port, no persistence, hash-max-listpack-value 256 as the store advises)."""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe import open_store  # noqa: E402
from nearduppipe.fingerprint.rule import Fingerprints, Rule  # noqa: E402

Page = tuple[Fingerprints, str]


def flip(x: int, bits: int, n: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


def workload(args: argparse.Namespace) -> list[Page]:
    rng = random.Random(7)
    seqs: list[list[Page]] = []
    for g in range(args.groups):
        orig = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
        key = f"https://news{g % 50}.example.com/2026/11/30/story-{g:06d}-a-headline-of-forty-ch"
        seq, prev = [(orig, key)], orig
        for c in range(args.copies):
            parent, wide = (orig, 30) if c % 2 == 0 else (prev, args.chain_wide)
            prev = Fingerprints(flip(parent.fp, 64, 3, rng), flip(parent.wide, 512, wide, rng))
            seq.append((prev, f"{key}?utm_source=copy{c}"))
        seqs.append(seq)
    for i in range(round(args.groups * args.fresh)):
        fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
        seqs.append([(fps, f"https://blog{i % 50}.example.org/posts/{i:07d}-another-slug")])
    order = [g for g, seq in enumerate(seqs) for _ in seq]
    rng.shuffle(order)
    at = [0] * len(seqs)
    pages = []
    for g in order:
        pages.append(seqs[g][at[g]])
        at[g] += 1
    return pages


def memfd_bytes() -> int:
    """Pages held by this process's memory files (index.columns: the index's and the stores'
    columns live there, unseen by tracemalloc)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:nearduppipe"):
                total += os.fstat(int(fd)).st_blocks * 512
        except OSError:
            pass
    return total


def run_pages(store: Any, pages: list[Page]) -> tuple[int, float, float]:
    """Pages dropped, CPU and wall seconds of the loop and a flush."""
    t0, c0 = time.perf_counter(), time.process_time()
    # (a new key string per page, as a crawl's request URL: the memory store keeps it)
    dropped = sum(store.check_and_add(fps, key.encode().decode()) is not None for fps, key in pages)
    store.flush()
    return dropped, time.process_time() - c0, time.perf_counter() - t0


def one(backend: str, aliases: bool, run: int, pages: list[Page], ctx: dict[str, Any]) -> dict:
    """One pass: dropped, kept, aliases, cpu, wall (seconds), server (CPU s), bytes."""
    rule, opts = Rule(aliases=aliases), {"max_decisions": ctx["max_decisions"]}
    out: dict[str, Any] = {"server": None, "bytes": None}
    if backend == "memory":
        traced = ctx.get("trace", False)
        if traced:
            gc.collect()  # (the stores of earlier passes, and their memory files, gone)
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0], memfd_bytes()
        store = open_store("memory:", rule=rule, **opts)
        out["dropped"], out["cpu"], out["wall"] = run_pages(store, pages)
        if traced:
            heap, files = tracemalloc.get_traced_memory()[0] - before[0], memfd_bytes() - before[1]
            out["bytes"], out["split"] = heap + files, (heap, files)
            tracemalloc.stop()
        out["kept"], out["aliases"] = len(store), store.alias_count
        store.close()
    elif backend == "sqlite":
        path = Path(ctx["tmp"]) / f"alias-cost-{run}-{int(aliases)}.sqlite"
        store = open_store(str(path), rule=rule, **opts)
        out["dropped"], out["cpu"], out["wall"] = run_pages(store, pages)
        out["kept"], out["aliases"] = len(store), store.alias_count
        store.close()
        files = [Path(f"{path}{s}") for s in ("", "-wal", "-shm", ".lock")]
        out["bytes"] = sum(f.stat().st_size for f in files[:2] if f.exists())
        for f in files:
            f.unlink(missing_ok=True)
    elif backend == "cluster":
        nodes, prefix = ctx["nodes"], f"ac{run}{int(aliases)}"

        def summed(section: str, keys: tuple[str, ...]) -> float:
            return sum(sum(c.info(section)[k] for k in keys) for c in nodes)

        for c in nodes:
            c.flushall()
        time.sleep(0.2)
        base = summed("memory", ("used_memory",))
        cpu = summed("cpu", ("used_cpu_user", "used_cpu_sys"))
        store = open_store(ctx["cluster_url"], rule=rule, prefix=prefix, reset=True, **opts)
        out["dropped"], out["cpu"], out["wall"] = run_pages(store, pages)
        out["server"] = summed("cpu", ("used_cpu_user", "used_cpu_sys")) - cpu
        out["bytes"] = summed("memory", ("used_memory",)) - base
        out["kept"], out["aliases"] = len(store), store.alias_count
        store.close()
        for c in nodes:
            c.flushall()
    else:
        client, prefix = ctx["client"], f"ac{run}{int(aliases)}"
        client.flushall()
        time.sleep(0.2)
        base = client.info("memory")["used_memory"]
        cpu = client.info("cpu")
        store = open_store(ctx["url"], rule=rule, prefix=prefix, reset=True, **opts)
        out["dropped"], out["cpu"], out["wall"] = run_pages(store, pages)
        after = client.info("cpu")
        out["server"] = sum(after[k] - cpu[k] for k in ("used_cpu_user", "used_cpu_sys"))
        out["bytes"] = client.info("memory")["used_memory"] - base
        out["kept"] = len(store)
        out["aliases"] = int(client.hget("{" + prefix + "}:meta", "aliases") or 0)
        store.close()
        client.flushall()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=16_000)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--fresh", type=float, default=0.25, help="unrelated pages per group")
    ap.add_argument("--chain-wide", type=int, default=40, help="512-bit flips, copy of a copy")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-decisions", type=int, default=1)
    ap.add_argument("--backends", default="memory,sqlite,redis")
    args = ap.parse_args()
    backends = args.backends.split(",")
    t_start = time.perf_counter()
    pages = workload(args)
    n = len(pages)
    print(
        f"{n:,} pages: {args.groups:,} groups of 1 + {args.copies} copies, "
        f"{round(args.groups * args.fresh):,} fresh; rule {Rule(aliases=True).describe()}; "
        f"decision log capped at {args.max_decisions}",
        flush=True,
    )
    results: dict[tuple[str, bool], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ctx: dict[str, Any] = {"tmp": tmp, "max_decisions": args.max_decisions}
        server = None
        if "redis" in backends:
            import redis

            from tests.support.redis_server import RedisServer

            server = RedisServer(Path(tmp) / "redis").start()
            ctx["url"], ctx["client"] = server.url, redis.Redis.from_url(server.url)
        cluster = None
        if "cluster" in backends:
            import redis

            from tests.support.redis_cluster import LocalCluster

            cluster = LocalCluster(Path(tmp) / "cluster").start()
            ctx["cluster_url"] = cluster.url
            ctx["nodes"] = [redis.Redis(host="127.0.0.1", port=p) for p in cluster.ports]
        try:
            for backend in backends:
                for run in range(args.runs):
                    for aliases in (False, True):
                        r = one(backend, aliases, run, pages, ctx)
                        results.setdefault((backend, aliases), []).append(r)
                        print(
                            f"  {backend} run {run + 1} aliases {'on ' if aliases else 'off'}: "
                            f"dropped {r['dropped']:,}, CPU {r['cpu']:.1f} s, "
                            f"wall {r['wall']:.1f} s",
                            flush=True,
                        )
                if backend == "memory":  # the bytes: one traced pass per setting
                    for aliases in (False, True):
                        r = one(backend, aliases, -1, pages, {**ctx, "trace": True})
                        for x in results[(backend, aliases)]:
                            x["bytes"] = r["bytes"]
                        heap, files = (x / len(pages) for x in r["split"])
                        print(
                            f"  memory bytes, aliases {'on ' if aliases else 'off'}: heap "
                            f"{heap:.1f} B/page (tracemalloc) + memory files {files:.1f} B/page"
                        )
        finally:
            if server is not None:
                ctx["client"].close()
                server.stop()
            if cluster is not None:
                for c in ctx["nodes"]:
                    c.close()
                cluster.stop()
    print(f"\nmedians of {args.runs} runs, per page checked ({n:,} pages):")
    head = (
        f"{'backend':8} {'aliases':7} {'dropped':>8} {'kept':>7} {'aliases':>8} "
        f"{'CPU us':>8} {'wall us':>8} {'server us':>9} {'B/page':>8} {'B/alias':>8}"
    )
    print(head)
    print("-" * len(head))

    def med(rs: list[dict], k: str) -> float | None:
        xs = [r[k] for r in rs if r[k] is not None]
        return statistics.median(xs) if xs else None

    def us(x: float | None) -> str:
        return f"{x / n * 1e6:8.1f}" if x is not None else f"{'-':>8}"

    for backend in backends:
        row: dict[bool, dict[str, Any]] = {}
        for aliases in (False, True):
            rs = results[(backend, aliases)]
            m = {k: med(rs, k) for k in ("cpu", "wall", "server", "bytes")}
            m.update({k: rs[0][k] for k in ("dropped", "kept", "aliases")})
            row[aliases] = m
            per_alias = ""
            more = m["kept"] + m["aliases"] - row[False]["kept"] - row[False]["aliases"]
            if aliases and more > 0:  # bytes per record the index holds more
                per_alias = f"{(m['bytes'] - row[False]['bytes']) / more:8.0f}"
            server = us(m["server"]) + " "
            print(
                f"{backend:8} {'on' if aliases else 'off':7} {m['dropped']:8,} {m['kept']:7,} "
                f"{m['aliases']:8,} {us(m['cpu'])} {us(m['wall'])} {server} "
                f"{m['bytes'] / n:8.1f} {per_alias:>8}"
            )
        ratio = {
            k: f"{row[True][k] / row[False][k]:8.2f}" if row[False][k] else f"{'-':>8}"
            for k in ("cpu", "wall", "server", "bytes")
        }
        print(
            f"{backend:8} {'on/off':7} {'':8} {'':7} {'':8} {ratio['cpu']} {ratio['wall']} "
            f"{ratio['server']}  {ratio['bytes']}"
        )
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
