"""The binary records of the Redis stores' decisions (every format since 2), and the reading of
a format-2 store's entries, which only a migration needs (:mod:`.migrate`,
:mod:`.cluster_migrate`; tests write format 2 with ``tests/support/redis_format2.py``).

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
import math
import struct

from ..base import Decision, Entry, StoreError

__all__ = [
    "DamagedRecord",
    "decode_decision",
    "decode_entry",
    "encode_decision",
    "entry_head",
]

NO_JOB = b"\xff\xff\xff\xff"
NO_WIDE = 0xFFFF
DECISION_TAG = b"\x02"
_TIME, _COUNT, _LEN = struct.Struct("<d"), struct.Struct(">H"), struct.Struct(">I")
_FP_END = 1 << 64
# what reading a record edited by hand (or written by another program) can raise
_BAD = (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError, KeyError)


class DamagedRecord(StoreError):
    """A record of the store that cannot be read: edited by hand, or written by another
    program. The message says what is wrong and shows the record's first bytes; the command
    line names the key and field it is in (``nearduppipe.cli``)."""

    def __init__(self, kind: str, raw: bytes, reason: object) -> None:
        shown = raw[:24].hex() + ("…" if len(raw) > 24 else "")
        super().__init__(f"a damaged {kind} record ({reason}; {len(raw)} bytes: {shown or '-'})")
        self.kind = kind


def _reason(err: BaseException) -> str:
    if isinstance(err, (struct.error, IndexError)):
        return "truncated, or a length field points beyond its end"
    if isinstance(err, UnicodeDecodeError):
        return f"text that is not UTF-8 ({err.reason} at byte {err.start})"
    if isinstance(err, KeyError):
        return f"no {err.args[0]}"
    return str(err)


def _text(text: str | None) -> bytes:
    return b"\x00" if text is None else b"\x01" + text.encode("utf-8")


def _str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">I", len(raw)) + raw


def _read_str(raw: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">I", raw, pos)
    if pos + 4 + n > len(raw):
        raise IndexError("a length beyond the record's end")
    return raw[pos + 4 : pos + 4 + n].decode("utf-8"), pos + 4 + n


def _read_text(raw: bytes, pos: int) -> str | None:
    if raw[pos] == 0:
        if pos + 1 != len(raw):
            raise ValueError(f"{len(raw) - pos - 1} bytes after the end")
        return None
    if raw[pos] != 1:
        raise ValueError(f"an unknown text marker {raw[pos]:#04x}")
    return raw[pos + 1 :].decode("utf-8")


def entry_head(raw: bytes) -> tuple[int, float, int | None, int]:
    """fp, stored_at, wide and the offset of the table fields of an entry record."""
    if len(raw) < 17 or raw[0] > 1 or (raw[0] and len(raw) < 81):
        why = f"an unknown kind of entry (flags {raw[0]:#04x})" if raw and raw[0] > 1 else None
        raise DamagedRecord("entry", raw, why or "truncated: shorter than its header")
    fp = int.from_bytes(raw[1:9], "big")
    (t,) = _TIME.unpack_from(raw, 9)
    if raw[0]:
        return fp, t, int.from_bytes(raw[17:81], "big"), 81
    return fp, t, None, 17


def decode_entry(raw: bytes) -> Entry:
    """An entry record, every length checked against the record's end; a record that is not
    one is a :class:`DamagedRecord` (a :class:`StoreError`), never a raw exception."""
    fp, t, wide, pos = entry_head(raw)
    try:
        if not math.isfinite(t):
            raise ValueError(f"a time that is not a finite number ({t})")
        (n,) = _COUNT.unpack_from(raw, pos)
        pos += 2 + 4 * n
        job: str | None = None
        if raw[pos : pos + 4] == NO_JOB:
            pos += 4
        else:
            (jl,) = _LEN.unpack_from(raw, pos)
            if pos + 4 + jl > len(raw):
                raise IndexError("a job length beyond the record's end")
            job = raw[pos + 4 : pos + 4 + jl].decode("utf-8", "surrogatepass")
            pos += 4 + jl
        key, pos = _read_str(raw, pos)
        return Entry(key, fp, t, _read_text(raw, pos), wide, job)
    except _BAD as err:
        raise DamagedRecord("entry", raw, _reason(err)) from None


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


def _json_fp(value: object, what: str) -> int:
    if not isinstance(value, str) or not value or value.strip("0123456789abcdefABCDEF"):
        raise ValueError(f"{what} is not a string of hex digits: {value!r:.40}")
    if len(value.lstrip("0")) > 16:
        raise ValueError(f"{what} is out of range ({len(value)} hex digits)")
    return int(value, 16)


def _json_decision(raw: bytes) -> Decision:
    """A format-1 decision (JSON), every field checked."""
    r = json.loads(raw)  # (a 100,000-digit number: a ValueError, as any other bad JSON)
    if not isinstance(r, dict):
        raise ValueError("not a JSON object")
    for name in ("key", "match"):
        if not isinstance(r[name], str):
            raise ValueError(f"{name} is not a string: {r[name]!r:.40}")
    d, t, text = r["distance"], r["t"], r.get("text")
    if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 64:
        raise ValueError(f"distance is not a whole number from 0 to 64: {d!r:.40}")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError(f"t is not a finite number: {t!r:.40}")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"text is not a string: {text!r:.40}")
    return Decision(
        r["key"], _json_fp(r["fp"], "fp"), r["match"], _json_fp(r["match_fp"], "match_fp"), d,
        float(t), text,
    )  # fmt: skip


def decode_decision(raw: bytes) -> Decision:
    """A decision record (binary, or format 1's JSON); one that is not one is a
    :class:`DamagedRecord`, never a raw exception."""
    try:
        if raw[:1] == b"{":  # format 1
            return _json_decision(raw)
        if raw[:1] != DECISION_TAG:
            tag = f"tag {raw[0]:#04x}" if raw else "empty"
            raise ValueError(f"an unknown kind of decision record ({tag})")
        d, w = struct.unpack_from(">HH", raw, 1)
        if d > 64 or (w != NO_WIDE and w > 512):
            raise ValueError(f"a distance out of range ({d}, wide {w})")
        mfp = int.from_bytes(raw[5:13], "big")
        mkey, pos = _read_str(raw, 13)
        if pos + 16 > len(raw):
            raise IndexError("truncated")
        fp = int.from_bytes(raw[pos : pos + 8], "big")
        (t,) = _TIME.unpack_from(raw, pos + 8)
        key, pos = _read_str(raw, pos + 16)
        text = _read_text(raw, pos)
    except _BAD as err:
        raise DamagedRecord("decision", raw, _reason(err)) from None
    return Decision(key, fp, mkey, mfp, d, t, text, None if w == NO_WIDE else w)
