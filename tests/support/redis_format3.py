"""What tests and benchmarks need of format 3 that the store does not (its records, tables and
buckets: ``nearduppipe/stores/redis/format3.py``, ``names.py``): a page key's 8-byte address
and its bucket, and the string-bucket layout that was measured and not taken, with
``redis_bucket.lua`` (beside this file), which reads and rewrites such buckets on a server::

    count(2) digests(8 each) record ends(4 each, from the start of the records) records
"""

from __future__ import annotations

import struct

import xxhash

from nearduppipe.stores.redis.codec import DamagedRecord

__all__ = ["bucket_of", "decode_bucket", "digest", "encode_bucket"]

_COUNT = struct.Struct(">H")


def digest(key: str) -> bytes:
    """The 8-byte address of a page key (xxh3-64: two keys of a 10 M store share one with
    probability ~3e-6, so a store must compare the record's key with the one it looks up)."""
    return xxhash.xxh3_64_digest(key.encode("utf-8"))


def bucket_of(d: bytes, bits: int) -> int:
    return int.from_bytes(d[:4], "big") >> (32 - bits)


def encode_bucket(items: list[tuple[bytes, bytes]]) -> bytes:
    """A bucket of (digest, record) pairs, in the order given."""
    ends, end = [], 0
    for _, rec in items:
        end += len(rec)
        ends.append(end)
    return b"".join(
        [
            _COUNT.pack(len(items)),
            *(d for d, _ in items),
            struct.pack(f">{len(items)}I", *ends),
            *(rec for _, rec in items),
        ]
    )


def decode_bucket(raw: bytes) -> list[tuple[bytes, bytes]]:
    """The (digest, record) pairs of a bucket; a bucket whose directory does not fit its
    length is a :class:`DamagedRecord`."""
    try:
        (n,) = _COUNT.unpack_from(raw, 0)
        base = 2 + 12 * n
        ends = struct.unpack_from(f">{n}I", raw, 2 + 8 * n)
        if base + (ends[-1] if n else 0) != len(raw) or any(
            b < a for a, b in zip((0, *ends), ends, strict=False)
        ):
            raise ValueError("record ends that do not fit the bucket")
    except (struct.error, ValueError) as err:
        raise DamagedRecord("bucket", raw, err) from None
    starts = (0, *ends[:-1])
    return [(raw[2 + 8 * j : 10 + 8 * j], raw[base + starts[j] : base + ends[j]]) for j in range(n)]
