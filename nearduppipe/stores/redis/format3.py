"""The records of the Redis stores' format 3 (issue #33 item 5; the single node and the Redis
Cluster's shards; keys and tables: :mod:`.names`, the buckets on the server:
``redis_entries3.lua``; format 2, what migrations read: :mod:`.codec`).
``benchmarks/redis_format3_layout.py`` fills a redis-server with these bytes alone to
measure ``used_memory`` per entry; ``benchmarks/redis_bench.py`` measures the store;
``nearduppipe migrate`` (:mod:`.migrate`) converts a format-2 store.

Why: format 2 keeps, per entry, a field of the hash ``{P}:e`` (entry id -> record, the page
key inside) and a field of ``{P}:k`` (page key -> id): two hash-table entries of ~24 bytes,
four small allocations and the page key twice, 355 B per entry with 60-character URLs. Format
3 keeps an entry once, addressed by an 8-byte digest of its page key (no key index), in one of
a fixed number of *buckets* (the digest's top bits), and the page key as (prefix id, suffix)
with the prefix (``scheme://host/``, shared by every page of a host) stored once in a table.

A bucket is a small hash (field: the digest's bytes after the bucket's, value: the record),
compact only while every record fits ``hash-max-listpack-value`` (64 by default, a record
with a 60-character URL is ~130: the server must be configured). The layout that needs no
server configuration, a string per bucket, was measured and not taken (a script copies a
string bucket per read and write; ``tests/support/redis_format3.py`` and
``redis_bucket.lua`` there keep its codec, tested against each other)::

    count(2) digests(8 each) record ends(4 each, from the start of the records) records

Both hold an entry in ~178 B at 60-character URLs; a string bucket costs the script a copy of
the whole bucket per read and per write (grows with the bucket: keep them to a few entries),
a listpack hash is read and edited by Redis's own C code.

Entry record (the script reads only the fixed head)::

    flags(1: bit 0 wide, bit 1 text, bit 2 alias) fp(8, BE) stored_at(8, '<d') seq(6, BE)
    [wide(64, BE)] job id(varint, 0 = none) prefix id(varint) suffix(varint length + UTF-8)
    [text(varint length + UTF-8)] [root(16): an alias's kept page: address(8) seq(6) 0(2)]

An *alias* (format 4: stores whose rule keeps them) is a page dropped for a kept page, kept as
a candidate for it: the head and key of an entry, no text, then the kept page's address and
the sequence number its entry had (the alias stands for the kept page only while that address
holds that entry: another store of the page, changed or not, gives it another number, as the
in-process stores give it another id).

``seq`` keeps the order entries were stored in (``entries()``, ties); job names and key
prefixes are ids into the store's tables (id -> text). Varints are minimal, so a record that
decodes re-encodes to exactly its bytes.
"""

from __future__ import annotations

import math
import struct
from typing import Any, NamedTuple

from .codec import DamagedRecord

__all__ = [
    "Record",
    "bucket_entries",
    "chunk",
    "decode_record",
    "encode_record",
    "listpack_advice",
    "listpack_limits",
    "split_key",
    "varint",
]

_T = struct.Struct("<d")
_SEQ_MAX = (1 << 48) - 1
_ID_END = 1 << 35  # (varints of at most 5 bytes)


class Record(NamedTuple):
    """An entry as a format-3 bucket holds it: the page key as (prefix id, suffix), the job
    as an id (0 = none)."""

    fp: int
    stored_at: float
    seq: int
    wide: int | None
    job_id: int
    prefix_id: int
    suffix: str
    text: str | None
    root: bytes | None = None  # an alias's kept page: address(8) + seq(6) + 2 zero bytes


def split_key(key: str) -> tuple[str, str]:
    """(prefix, suffix) of a page key: the prefix is ``scheme://host/`` of a URL (every page
    of a host shares it: stored once), else empty."""
    scheme, sep, rest = key.partition("://")
    if not sep or not scheme.isalpha():
        return "", key
    slash = rest.find("/")
    if slash < 0:
        return "", key
    cut = len(scheme) + 3 + slash + 1
    return key[:cut], key[cut:]


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _readvarint(raw: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = raw[pos]  # (an IndexError past the end: truncated)
        n |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            if b == 0 and shift:  # (one value, one encoding: a record re-encodes to itself)
                raise ValueError("a varint that is not minimal")
            return n, pos
        shift += 7
        if shift > 35:
            raise ValueError("a length or id of more than 5 varint bytes")


def chunk(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return varint(len(raw)) + raw


def encode_record(r: Record) -> bytes:
    if not 0 <= r.seq <= _SEQ_MAX:
        raise ValueError(f"sequence number out of range: {r.seq}")
    if not (0 <= r.job_id < _ID_END and 0 <= r.prefix_id < _ID_END):
        raise ValueError(f"a table id out of range: job {r.job_id}, prefix {r.prefix_id}")
    if r.root is not None and (len(r.root) != 16 or r.text is not None):
        raise ValueError("an alias has a 16-byte root and no text")
    flags = (r.wide is not None) | (r.text is not None) << 1 | (r.root is not None) << 2
    parts = [
        bytes([flags]),
        r.fp.to_bytes(8, "big"),
        _T.pack(r.stored_at),
        r.seq.to_bytes(6, "big"),
    ]
    if r.wide is not None:
        parts.append(r.wide.to_bytes(64, "big"))
    parts += (varint(r.job_id), varint(r.prefix_id), chunk(r.suffix))
    if r.text is not None:
        parts.append(chunk(r.text))
    if r.root is not None:
        parts.append(r.root)
    return b"".join(parts)


def decode_record(raw: bytes) -> Record:
    """A record, every length checked against its end; one that is not a record is a
    :class:`DamagedRecord` (hand-edited, or another program's), never a raw exception."""
    try:
        if not raw or raw[0] > 7 or raw[0] & 6 == 6:
            raise ValueError(f"an unknown kind of entry (flags {raw[:1].hex() or '-'})")
        has_wide, has_text, alias = raw[0] & 1, raw[0] & 2, raw[0] & 4
        pos = 23 + 64 * has_wide
        if len(raw) < pos + 3:
            raise IndexError("shorter than its header")
        fp = int.from_bytes(raw[1:9], "big")
        (t,) = _T.unpack_from(raw, 9)
        if not math.isfinite(t):
            raise ValueError(f"a time that is not a finite number ({t})")
        seq = int.from_bytes(raw[17:23], "big")
        wide = int.from_bytes(raw[23:87], "big") if has_wide else None
        job_id, pos = _readvarint(raw, pos)
        prefix_id, pos = _readvarint(raw, pos)
        suffix, pos = _read_chunk(raw, pos)
        text = None
        if has_text:
            text, pos = _read_chunk(raw, pos)
        root = None
        if alias:
            if pos + 16 > len(raw):
                raise IndexError("an alias without its root")
            root, pos = raw[pos : pos + 16], pos + 16
        if pos != len(raw):
            raise ValueError(f"{len(raw) - pos} bytes after the end")
    except (IndexError, ValueError, UnicodeDecodeError) as err:
        reason = "truncated" if isinstance(err, IndexError) else str(err)
        raise DamagedRecord("entry", raw, reason) from None
    return Record(fp, t, seq, wide, job_id, prefix_id, suffix, text, root)


def _read_chunk(raw: bytes, pos: int) -> tuple[str, int]:
    n, pos = _readvarint(raw, pos)
    if pos + n > len(raw):
        raise IndexError("a length beyond the record's end")
    return raw[pos : pos + n].decode("utf-8", "surrogatepass"), pos + n


# the server settings under which a bucket hash stays a listpack (Redis 7 names, then 6.2's)
_LIMIT_NAMES = (
    ("hash-max-listpack-value", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-ziplist-entries"),
)


def listpack_limits(client: Any) -> tuple[int, int] | None:
    """The server's (value, entries) limits of a compact hash, or ``None`` when ``CONFIG GET``
    is refused (managed services often rename or disable it): then a store cannot check."""
    import redis

    for names in _LIMIT_NAMES:
        try:
            got = {**client.config_get(names[0]), **client.config_get(names[1])}
        except redis.ResponseError:
            return None
        if all(n in got for n in names):
            return int(got[names[0]]), int(got[names[1]])
    return None


def bucket_entries(live: int, buckets: int, floor: int = 512) -> int:
    """The ``hash-max-listpack-entries`` under which the fullest of ``buckets`` buckets holding
    ``live`` entries in all stays compact. The addresses are hashes, so bucket sizes are
    Poisson: the mean plus 6 standard deviations (+8) is passed by about one bucket in 10^9;
    at least ``floor``, rounded up to a multiple of 128. Why: past ~25 M entries on one node
    512 no longer holds, and a bucket that outgrows it becomes a hash table for good."""
    mean = live / buckets
    need = math.ceil(mean + 6 * math.sqrt(mean) + 8)
    return max(floor, -(-need // 128) * 128)


def listpack_advice(limits: tuple[int, int] | None, value: int, entries: int) -> str | None:
    """What to tell the user when buckets of ``entries`` records of up to ``value`` bytes
    would not stay compact under ``limits`` (``None``: nothing to say). Not an error: the
    store works either way, at ~1.4x the memory per entry (measured: 242.7 B against 178.3
    at 60-character URLs, ``benchmarks/redis_format3_layout.py``)."""
    if limits is None:
        return (
            "cannot read the server's hash-max-listpack-value and hash-max-listpack-entries "
            f"(CONFIG is disabled): they must be at least {value} and {entries} for the "
            "store's compact memory layout"
        )
    if limits[0] >= value and limits[1] >= entries:
        return None
    return (
        f"the server keeps hashes compact up to {limits[0]}-byte values and {limits[1]} "
        f"entries; this store's records need {value} and {entries}: set "
        f"'hash-max-listpack-value {max(value, limits[0])}' and 'hash-max-listpack-entries "
        f"{max(entries, limits[1])}' (redis.conf, or CONFIG SET) or each entry takes ~1.4x "
        "the memory"
    )
