"""The binary records of a format-2 Redis store, shared with ``redis_check_and_add.lua``.

Binary, not JSON: a fingerprint is 8 raw bytes and a wide one 64, and times are IEEE doubles,
so every value round-trips exactly (Lua's cjson prints 14 digits) and the script reads the
fixed-offset header without decoding anything.

Entry (``{P}:e`` field = the entry id as 8 big-endian bytes)::

    flags(1: bit 0 = has wide) fp(8, BE) stored_at(8, '<d') [wide(64, BE)]
    n_tables(2) table fields(4 each) job(4-byte length or FFFFFFFF = none, bytes)
    key(4-byte length, bytes) text(0 = none | 1 + UTF-8 bytes to the end)

Decision (``{P}:d`` items; format 1 wrote JSON objects starting with ``{``)::

    02 distance(2) wide distance(2, FFFF = none) matched fp(8) matched key(4 + bytes)
    fp(8) decided_at(8, '<d') key(4 + bytes) text(0 | 1 + bytes)

Table member (a bucket's value is members end to end): fp(8, BE) entry id(8, BE).
"""

from __future__ import annotations

import json
import struct

from ..base import Decision, Entry, Match

__all__ = [
    "decode_decision",
    "decode_entry",
    "decode_match",
    "encode_decision",
    "encode_entry",
    "encode_job",
    "entry_head",
]

NO_JOB = b"\xff\xff\xff\xff"
NO_WIDE = 0xFFFF
DECISION_TAG = b"\x02"
_TIME, _COUNT, _LEN = struct.Struct("<d"), struct.Struct(">H"), struct.Struct(">I")


def encode_job(job: str | None) -> bytes:
    if job is None:
        return NO_JOB
    raw = job.encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(raw)) + raw


def _text(text: str | None) -> bytes:
    return b"\x00" if text is None else b"\x01" + text.encode("utf-8")


def _str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">I", len(raw)) + raw


def encode_entry(
    fp: int,
    wide: int | None,
    t: float,
    fields: bytes,
    job: str | None,
    key: str,
    text: str | None,
) -> bytes:
    raw_key = key.encode("utf-8")
    parts = [b"\x00" if wide is None else b"\x01", fp.to_bytes(8, "big"), _TIME.pack(t)]
    if wide is not None:
        parts.append(wide.to_bytes(64, "big"))
    parts += (_COUNT.pack(len(fields) // 4), fields, encode_job(job), _LEN.pack(len(raw_key)))
    parts += (raw_key, _text(text))
    return b"".join(parts)  # (every check encodes one: one join, structs compiled once)


def _read_str(raw: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">I", raw, pos)
    return raw[pos + 4 : pos + 4 + n].decode("utf-8"), pos + 4 + n


def _read_text(raw: bytes, pos: int) -> str | None:
    return None if raw[pos] == 0 else raw[pos + 1 :].decode("utf-8")


def entry_head(raw: bytes) -> tuple[int, float, int | None, int]:
    """fp, stored_at, wide and the offset of the table fields of an entry record."""
    fp = int.from_bytes(raw[1:9], "big")
    (t,) = struct.unpack_from("<d", raw, 9)
    if raw[0] & 1:
        return fp, t, int.from_bytes(raw[17:81], "big"), 81
    return fp, t, None, 17


def decode_entry(raw: bytes) -> Entry:
    fp, t, wide, pos = entry_head(raw)
    (n,) = struct.unpack_from(">H", raw, pos)
    pos += 2 + 4 * n
    job: str | None = None
    if raw[pos : pos + 4] == NO_JOB:
        pos += 4
    else:
        (jl,) = struct.unpack_from(">I", raw, pos)
        job = raw[pos + 4 : pos + 4 + jl].decode("utf-8", "surrogatepass")
        pos += 4 + jl
    key, pos = _read_str(raw, pos)
    return Entry(key, fp, t, _read_text(raw, pos), wide, job)


def decode_match(raw: bytes, pos: int = 0) -> tuple[Match, int]:
    """A script reply item: distance(2) wide(2) record length(4) record."""
    d, w, n = struct.unpack_from(">HHI", raw, pos)
    entry = decode_entry(raw[pos + 8 : pos + 8 + n])
    return Match(entry.key, entry.fingerprint, d, None if w == NO_WIDE else w), pos + 8 + n


def decision_head(fp: int, t: float, key: str, text: str | None) -> bytes:
    """The query's half of a decision; the script prepends the match's half."""
    return fp.to_bytes(8, "big") + struct.pack("<d", t) + _str(key) + _text(text)


def encode_decision(d: Decision) -> bytes:
    w = NO_WIDE if d.wide_distance is None else d.wide_distance
    return (
        DECISION_TAG
        + struct.pack(">HH", d.distance, w)
        + d.matched_fingerprint.to_bytes(8, "big")
        + _str(d.matched_key)
        + decision_head(d.fingerprint, d.decided_at, d.key, d.text)
    )


def decode_decision(raw: bytes) -> Decision:
    if raw[:1] == b"{":  # format 1
        r = json.loads(raw)
        return Decision(
            r["key"],
            int(r["fp"], 16),
            r["match"],
            int(r["match_fp"], 16),
            int(r["distance"]),
            float(r["t"]),
            r.get("text"),
        )
    d, w = struct.unpack_from(">HH", raw, 1)
    mfp = int.from_bytes(raw[5:13], "big")
    mkey, pos = _read_str(raw, 13)
    fp = int.from_bytes(raw[pos : pos + 8], "big")
    (t,) = struct.unpack_from("<d", raw, pos + 8)
    key, pos = _read_str(raw, pos + 16)
    return Decision(key, fp, mkey, mfp, d, t, _read_text(raw, pos), None if w == NO_WIDE else w)
