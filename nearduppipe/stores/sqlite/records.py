"""Records of the sqlite store (format 2), their plain-JSON encoding, and reading format 1.

One sqlitedict table, keys by kind (all values JSON text, never pickle):

* ``m:format``  2;  ``m:created``  UNIX time;  ``m:rule``  the decision rule
  (:meth:`Rule.as_dict`);  ``m:state``  sequence counters and revisit/decision counters
* ``k:<page key>``   ``[rid, job]``: the page's current entry
* ``i:<rid>``        ``["<fp 16 hex>", "<wide 128 hex or empty>", stored_at, job, key(, text)]``
* ``d:<seq>``        ``{"key", "fp", "match", "match_fp", "distance", "wide", "t"(, "text")}``

``rid`` and ``seq`` are 12 hex digits, so key order is numeric order. A key's entry is the pair
(``k:``, ``i:``) written in one transaction; replacing it writes a new ``rid`` and deletes the
old ``i:`` row, so ``rid`` order is the order pages were stored. Nothing depends on rids being
contiguous: a missing row is one lost page, never an unreadable store.

Format 1 (``e:<id>`` rows ``["<fp>", t, "key"(, "text")]``, ids contiguous, possibly several
rows per key) is read here too: the newest row per key wins, with no wide fingerprint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

import numpy as np

from ...fingerprint.rule import Fingerprints
from ..base import Decision, Entry, StoreError
from .files import TABLE, decode, encode
from .keys import key_hash

__all__ = [
    "Loaded",
    "decision_record",
    "entry_record",
    "key_hashes_v2",
    "key_record",
    "live_rows",
    "load_v2",
    "parse_decision",
    "parse_entry",
    "read_state",
    "read_v1",
]

WIDE_HEX = 128


def _string(s: str | None) -> str:
    return "null" if s is None else encode_basestring(s)


def entry_record(fps: Fingerprints, t: float, job: str | None, key: str, text: str | None) -> str:
    # Formatted by hand (json.dumps costs several µs per field): the same JSON text.
    fp, wide = fps
    hex_wide = "" if wide is None else wide.to_bytes(WIDE_HEX // 2, "big").hex()
    tail = "" if text is None else "," + encode_basestring(text)
    job_text = "null" if job is None else encode_basestring(job)
    # the time in full (repr): the snapshot and the in-memory index keep it so, and a TTL
    # boundary must fall where it fell before a reopen
    return f'["{fp:016x}","{hex_wide}",{float(t)!r},{job_text},{encode_basestring(key)}{tail}]'


def key_record(rid: int, job: str | None) -> str:
    """The ``k:`` row: ``[rid, job]``."""
    return f"[{rid},{_string(job)}]"


def key_hashes_v2(
    conn: sqlite3.Connection, path: Path, rids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The key hash of each entry (in ``rids`` order), from the ``k:`` rows, and which entries
    a ``k:`` row points to (an ``i:`` row none points to is no page's entry: damage, or a row
    written by hand)."""
    found: list[int] = []
    hashes: list[int] = []
    rows = conn.execute(f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'k:' AND key < 'k;'")
    for row_key, value in rows:
        try:
            found.append(int(value[1 : value.index(",")]))
        except (TypeError, ValueError):
            raise StoreError(f"{path}: record {row_key!r:.90} is damaged") from None
        hashes.append(key_hash(row_key[2:]))
    out = np.zeros(len(rids), dtype=np.uint64)
    linked = np.zeros(len(rids), dtype=bool)
    at, hit = _positions(rids, np.array(found, dtype=np.int64))
    out[at[hit]] = np.array(hashes, dtype=np.uint64)[hit]
    linked[at[hit]] = True
    return out, linked


def _positions(rids: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``want`` is in ``rids`` (ascending), and whether it is there at all."""
    if not len(rids):
        return np.zeros(len(want), dtype=np.int64), np.zeros(len(want), dtype=bool)
    at = np.minimum(np.searchsorted(rids, want), len(rids) - 1)
    return at, rids[at] == want


def live_rows(
    path: Path, rows: list[tuple[str, Any]], rids: np.ndarray, alive: np.ndarray
) -> np.ndarray:
    """Which ``i:`` rows (``(row key, value)``) are entries of the index whose row ids (ascending)
    and live flags are given: one vectorised lookup per batch, not one per row."""
    try:
        want = np.fromiter((int(k[2:], 16) for k, _ in rows), dtype=np.int64, count=len(rows))
    except ValueError:
        raise StoreError(f"{path}: a record key among {rows[0][0]!r:.40}... is damaged") from None
    at, hit = _positions(rids, want)
    found: np.ndarray = hit & alive[at] if len(rids) else hit
    return found


def parse_entry(value: Any, where: str) -> Entry:
    r = decode(value, where)
    try:
        fp_hex, wide_hex, t, job, key, *text = r
        return Entry(
            str(key),
            int(fp_hex, 16),
            float(t),
            str(text[0]) if text else None,
            int(wide_hex, 16) if wide_hex else None,
            None if job is None else str(job),
        )
    except (TypeError, ValueError) as e:
        raise StoreError(f"{where}: malformed entry record ({e})") from None


def decision_record(d: Decision) -> str:
    record: dict[str, Any] = {
        "key": d.key,
        "fp": f"{d.fingerprint:016x}",
        "match": d.matched_key,
        "match_fp": f"{d.matched_fingerprint:016x}",
        "distance": d.distance,
        "wide": d.wide_distance,
        "t": round(d.decided_at, 3),
    }
    if d.text is not None:
        record["text"] = d.text
    return encode(record)


def parse_decision(value: Any, where: str) -> Decision:
    r = decode(value, where)
    try:
        return Decision(
            str(r["key"]),
            int(r["fp"], 16),
            str(r["match"]),
            int(r["match_fp"], 16),
            int(r["distance"]),
            float(r["t"]),
            r.get("text"),
            None if r.get("wide") is None else int(r["wide"]),
        )
    except (TypeError, ValueError, KeyError) as e:
        raise StoreError(f"{where}: malformed decision record ({e})") from None


@dataclass
class Loaded:
    """What the in-memory index needs, in rid order."""

    rids: np.ndarray
    fps: np.ndarray
    wide: np.ndarray
    has_wide: np.ndarray
    times: np.ndarray
    keys: np.ndarray | None = None  # the 64-bit hash of each entry's key (snapshot only)
    key_filter: bytes | None = None  # the key filter's bits, as saved (snapshot only)

    def only(self, mask: np.ndarray) -> Loaded:
        """The entries where ``mask`` is true (the key filter is not carried over)."""
        keys = None if self.keys is None else self.keys[mask]
        return Loaded(
            self.rids[mask], self.fps[mask], self.wide[mask], self.has_wide[mask],
            self.times[mask], keys,
        )  # fmt: skip


def _fast_fields(value: str) -> tuple[int, str, float] | None:
    # '["<16 hex>","<128 hex or empty>",<t>,...': slice instead of parsing JSON (10x faster).
    if not (value.startswith('["') and value[18:21] == '","'):
        return None
    end = 21 if value[21:22] == '"' else 21 + WIDE_HEX
    if value[end : end + 2] != '",':
        return None
    comma = value.find(",", end + 2)
    return int(value[2:18], 16), value[21:end], float(value[end + 2 : comma])


def load_v2(conn: sqlite3.Connection, path: Path) -> Loaded:
    """Every ``i:`` row in rid order, in one pass over the table."""
    rids: list[int] = []
    fps: list[int] = []
    times: list[float] = []
    wide_hex: list[str] = []
    rows = conn.execute(
        f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'i:' AND key < 'i;' ORDER BY key"
    )
    for row_key, value in rows:
        try:
            fast = _fast_fields(value) if isinstance(value, str) else None
            if fast is None:
                e = parse_entry(value, f"{path}: record {row_key}")
                fast = (
                    e.fingerprint,
                    "" if e.wide is None else f"{e.wide:0{WIDE_HEX}x}",
                    e.stored_at,
                )
            rid = int(row_key[2:], 16)
        except (StoreError, ValueError) as err:
            raise StoreError(f"{path}: record {row_key!r} is damaged ({err})") from None
        rids.append(rid)
        fps.append(fast[0])
        wide_hex.append(fast[1])
        times.append(fast[2])
    n = len(rids)
    has_wide = np.fromiter((bool(w) for w in wide_hex), dtype=bool, count=n)
    blob = bytes.fromhex("".join(w or "0" * WIDE_HEX for w in wide_hex))
    # hex is big-endian; the in-memory words are little-endian 64-bit words of the integer
    wide = np.frombuffer(blob, dtype=np.uint8).reshape(n, 64)[:, ::-1].copy()
    return Loaded(
        np.array(rids, dtype=np.int64),
        np.array(fps, dtype=np.uint64),
        wide.view("<u8").reshape(n, 8).astype(np.uint64),
        has_wide,
        np.array(times, dtype=np.float64),
    )


def read_v1(conn: sqlite3.Connection, path: Path) -> tuple[list[Entry], Iterator[Decision]]:
    """A format-1 store's entries (the newest per key, oldest first) and decisions."""
    newest: dict[str, Entry] = {}
    rows = conn.execute(
        f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'e:' AND key < 'e;' ORDER BY key"
    )
    for row_key, value in rows:
        r = decode(value, f"{path}: record {row_key}")
        try:
            fp_hex, t, key, *text = r
            entry = Entry(str(key), int(fp_hex, 16), float(t), str(text[0]) if text else None)
        except (TypeError, ValueError) as e:
            raise StoreError(f"{path}: record {row_key!r} is damaged ({e})") from None
        newest.pop(entry.key, None)  # re-insert: dict order becomes the order of the newest
        newest[entry.key] = entry

    def decisions() -> Iterator[Decision]:
        cur = conn.execute(
            f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'd:' AND key < 'd;' ORDER BY key"
        )
        for row_key, value in cur:
            yield parse_decision(value, f"{path}: record {row_key}")

    return list(newest.values()), decisions()


def read_state(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """The ``m:state`` record (sequences, counters, the snapshot token); empty if absent."""
    row = conn.execute(f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:state",)).fetchone()
    if row is None:
        return {}
    state = decode(row[0], f"{path}: record m:state")
    if not isinstance(state, dict):
        raise StoreError(f"{path}: record m:state is damaged")
    return state
