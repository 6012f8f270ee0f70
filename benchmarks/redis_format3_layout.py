"""Redis memory per entry of the proposed store format 3 (``nearduppipe/stores/redis/format3.py``),
measured by filling a fresh loopback redis-server with exactly the bytes that layout keeps:
buckets of (digest, record) pairs, the log ``{P}:n`` of 16-byte members (fingerprint, digest;
``--log-member 24`` adds the entry's sequence number), the prefix and job tables. The store
does not write this layout yet (it writes format 2): this measures the layout, not the store.
Buckets are written whole, once, as a store editing them per insert would leave them (a
rebuilt string is allocated at its exact length; ``used_memory`` counts allocator size
classes, not fragmentation).

    python benchmarks/redis_format3_layout.py [--n 1000000,10000000] [--key-length 60]
        [--bucket-bits 16] [--kind uniform] [--ttl] [--format2]
        [--layout strings|hashes] [--listpack-value 256] [--log-member 16|24]

The same page keys and fingerprints as ``redis_bench.py`` (``page_key``, ``pages``).
``--layout hashes`` keeps each bucket as a hash (field: the digest's last 6 bytes, value: the
record) instead of a string; compact (listpack) only with ``--listpack-value`` at least the
records' length (the server is started with it, and ``hash-max-listpack-entries 1024``).
``--ttl`` gives every bucket an expiry, as a store with a TTL does. ``--format2`` also imports
the same entries with the real (format-2) store into another fresh server, for the ratio.
Bytes per entry are printed against the 80 raw bytes of fingerprint, wide fingerprint and id.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from redis_bench import page_key, pages

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.stores.base import Entry  # noqa: E402
from nearduppipe.stores.redis.format3 import Record, encode_record, split_key  # noqa: E402
from tests.support.redis_format2 import write_format2  # noqa: E402
from tests.support.redis_format3 import bucket_of, digest  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

P = "{bench}:"
RAW = 8 + 64 + 8  # fingerprint, wide fingerprint, id


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def fill(client: redis.Redis, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Write the format-3 layout of ``n`` entries; the used_memory each part added."""
    bits = args.bucket_bits
    blob = bytearray()
    ends = np.zeros(n, dtype=np.int64)
    bucket = np.zeros(n, dtype=np.int64)
    digests = bytearray()
    members = bytearray()
    prefixes: dict[str, int] = {}
    t0 = time.perf_counter()
    for i, f in enumerate(pages(args.kind, 1, n)):
        key = page_key(i, args.key_length)
        d = digest(key)
        prefix, suffix = split_key(key)
        pid = prefixes.setdefault(prefix, len(prefixes) + 1)
        blob += encode_record(Record(f.fp, 1.7e9 + i, i + 1, f.wide, 1, pid, suffix, None))
        ends[i] = len(blob)
        bucket[i] = bucket_of(d, bits)
        digests += d
        members += f.fp.to_bytes(8, "big") + d + (i + 1).to_bytes(8, "big")[: args.log_member - 16]
    made = time.perf_counter() - t0
    out: dict[str, Any] = {"encode_s": made, "prefixes": len(prefixes)}
    base = used(client)
    client.hset(P + "meta", mapping={"format": 3, "bucket_bits": bits, "seq": n})
    client.hset(P + "u", mapping={pid: p for p, pid in prefixes.items()})
    client.hset(P + "j", 1, "seed")
    starts = np.concatenate(([0], ends[:-1]))
    order = np.argsort(bucket, kind="stable")  # (within a bucket: the order stored)
    bounds = np.searchsorted(bucket[order], np.arange((1 << bits) + 1))
    pipe = client.pipeline(transaction=False)
    payload = 0
    for b in range(1 << bits):
        idx = order[bounds[b] : bounds[b + 1]]
        if not len(idx):
            continue
        recs = [bytes(blob[starts[j] : ends[j]]) for j in idx]
        cum = np.cumsum([len(r) for r in recs])
        value = b"".join(
            [
                len(idx).to_bytes(2, "big"),
                *(bytes(digests[8 * j : 8 * j + 8]) for j in idx),
                cum.astype(">u4").tobytes(),
                *recs,
            ]
        )
        payload += len(value)
        name = P.encode() + b"b" + b.to_bytes((bits + 7) // 8, "big")
        if args.layout == "hashes":  # field: the digest's 6 bytes after the bucket's 2
            pipe.hset(
                name,
                mapping={
                    bytes(digests[8 * j + 2 : 8 * j + 8]): bytes(blob[starts[j] : ends[j]])
                    for j in idx
                },
            )
        else:
            pipe.set(name, value)
        if args.ttl:
            pipe.expire(name, 30 * 86400)
        if len(pipe) >= 2000:
            pipe.execute()
    pipe.execute()
    out["encoding"] = client.object("encoding", name).decode()  # (the last bucket's)
    out["buckets"] = used(client) - base
    out["payload"] = payload
    base = used(client)
    for s in range(0, len(members), 16 * 1000):
        pipe.rpush(
            P + "n", *(members[j : j + 16] for j in range(s, min(s + 16000, len(members)), 16))
        )
        if len(pipe) >= 50:
            pipe.execute()
    pipe.execute()
    out["log"] = used(client) - base
    return out


def format2(n: int, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        client = redis.Redis.from_url(server.url)
        try:
            base = used(client)
            # (format 2 as the earlier release wrote it: the store itself now writes format 3)
            held = write_format2(
                client,
                "bench",
                (
                    Entry(page_key(i, args.key_length), f.fp, 1.7e9 + i, None, f.wide, "seed")
                    for i, f in enumerate(pages(args.kind, 1, n))
                ),
            )
            return (used(client) - base) / held
        finally:
            client.close()
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1000000,10000000")
    ap.add_argument("--key-length", type=int, default=60)
    ap.add_argument("--bucket-bits", type=int, default=16)
    ap.add_argument("--kind", choices=("uniform", "clustered"), default="uniform")
    ap.add_argument("--ttl", action="store_true")
    ap.add_argument("--layout", choices=("strings", "hashes"), default="strings")
    ap.add_argument("--log-member", type=int, choices=(16, 24), default=16)
    ap.add_argument(
        "--listpack-value", type=int, default=0, help="hashes: hash-max-listpack-value (0: default)"
    )
    ap.add_argument("--format2", action="store_true")
    args = ap.parse_args()
    for n in map(int, args.n.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            extra: tuple[str, ...] = ()
            if args.listpack_value:
                extra = ("--hash-max-listpack-value", str(args.listpack_value))
                extra += ("--hash-max-listpack-entries", "1024")
            server = RedisServer(Path(tmp), extra=extra).start()
            client = redis.Redis.from_url(server.url)
            try:
                version = client.info("server")["redis_version"]
                base = used(client)
                r = fill(client, n, args)
                total = used(client) - base
            finally:
                client.close()
                server.stop()
        per = total / n
        print(
            f"format 3 layout, n={n:,}, {args.kind}, page keys like "
            f"{page_key(n // 2, args.key_length)!r}, {1 << args.bucket_bits:,} buckets "
            f"({n / (1 << args.bucket_bits):.0f} entries each) as {args.layout}"
            f"{f' (hash-max-listpack-value {args.listpack_value})' if args.listpack_value else ''}, "
            f"{args.log_member}-byte log members, buckets kept as {r['encoding']}, ttl={'yes' if args.ttl else 'no'}, "
            f"redis {version}, {r['prefixes']} key prefix(es)"
        )
        print(
            f"  used_memory +{total / 1e6:.0f} MB = {per:.1f} B/entry "
            f"({per / RAW:.2f}x the {RAW} raw bytes of fingerprint + wide + id): buckets "
            f"{r['buckets'] / n:.1f} (their bytes {r['payload'] / n:.1f}), log {r['log'] / n:.1f}"
        )
        if args.format2:
            f2 = format2(n, args)
            print(f"  format 2 (the store's import) in the same run: {f2:.1f} B/entry")


if __name__ == "__main__":
    main()
