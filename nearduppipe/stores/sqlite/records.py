"""Records of the sqlite store (format 2), their plain-JSON encoding, and reading format 1.

One sqlitedict table, keys by kind (all values JSON text, never pickle):

* ``m:format``  2;  ``m:created``  UNIX time;  ``m:rule``  the decision rule
  (:meth:`Rule.as_dict`);  ``m:state``  sequence counters and revisit/decision counters
* ``k:<page key>``   ``[rid, job]``: the page's current entry
* ``i:<rid>``        ``["<fp 16 hex>", "<wide 128 hex or empty>", stored_at, job, key(, text)]``
* ``d:<seq>``        ``{"key", "fp", "match", "match_fp", "distance", "wide", "t"(, "text")}``
* ``a:<rid>``        ``["<fp>", "<wide>", stored_at, job, key, <rid of the kept page's i: row>]``:
  an alias (format 3, stores whose rule keeps them: a page dropped for the kept page, whose
  ``k:`` row points to this rid; ``rid`` counts with the entries')

``rid`` and ``seq`` are 12 hex digits, so key order is numeric order. A key's entry is the pair
(``k:``, ``i:``) written in one transaction; replacing it writes a new ``rid`` and deletes the
old ``i:`` row, so ``rid`` order is the order pages were stored. Nothing depends on rids being
contiguous: a missing row is one lost page, never an unreadable store.

Format 1 (``e:<id>`` rows ``["<fp>", t, "key"(, "text")]``, ids contiguous, possibly several
rows per key) is read here too: the newest row per key wins, with no wide fingerprint.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

import numpy as np

from ...fingerprint.rule import Fingerprints
from ..base import Decision, Entry, StoreError
from .fields import (
    FP_END,
    HEX_DIGITS,
    WIDE_END,
    damaged,
    decode_row,
    finite_number,
    hex_number,
    hint,
    text_or_none,
    whole_number,
)
from .files import TABLE, decode, encode
from .keys import key_hash

__all__ = [
    "Loaded",
    "alias_record",
    "decision_record",
    "entry_record",
    "key_hashes_v2",
    "key_record",
    "live_rows",
    "load_v2",
    "parse_alias",
    "parse_decision",
    "parse_entry",
    "parse_entry_key",
    "parse_key",
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


def alias_record(fps: Fingerprints, t: float, job: str | None, key: str, root: int) -> str:
    """The ``a:`` row: an entry row's first five fields, then the kept page's row id."""
    return entry_record(fps, t, job, key, None)[:-1] + f",{int(root)}]"


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
            where = f"{path}: record {row_key!r:.90}"
            raise damaged(where, "key", "not [entry id, job]") from None
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


def _entry(r: Any) -> Entry:
    """The fields of a decoded ``i:`` row, every one checked (a row edited by hand must not
    reach a copy or the index as a wrong value: a fingerprint beyond 64 bits, a number for a
    key); ``ValueError`` says which is wrong."""
    if not isinstance(r, list) or len(r) not in (5, 6):
        raise ValueError(
            f"{len(r)} fields where 5 or 6 belong"
            if isinstance(r, list)
            else f"not a list of fields: {r!r:.40}"
        )
    fp_hex, wide_hex, t, job, key, *text = r
    if not isinstance(key, str):
        raise ValueError(f"the page key is not a string: {key!r:.40}")
    return Entry(
        key,
        hex_number(fp_hex, FP_END, "the fingerprint"),
        finite_number(t, "the time"),
        text_or_none(text[0], "the text sample") if text else None,
        hex_number(wide_hex, WIDE_END, "the wide fingerprint") if wide_hex != "" else None,
        text_or_none(job, "the job"),
    )


def parse_entry(value: Any, where: str) -> Entry:
    try:
        return _entry(decode_row(value, where))
    except (TypeError, ValueError) as e:
        raise damaged(where, "entry", e) from None


def _alias(r: Any) -> tuple[Entry, int]:
    if not isinstance(r, list) or len(r) != 6:
        raise ValueError(
            f"{len(r)} fields where 6 belong" if isinstance(r, list) else f"not a list: {r!r:.40}"
        )
    root = r[5]
    if type(root) is not int or root < 0:
        raise ValueError(f"the kept page's row id is not a row id: {root!r:.40}")
    return _entry(r[:5]), root


def parse_alias(value: Any, where: str) -> tuple[Entry, int]:
    """An ``a:`` row: the dropped page as an entry (no text), and its kept page's row id."""
    try:
        return _alias(decode_row(value, where))
    except (TypeError, ValueError) as e:
        raise damaged(where, "alias", e) from None


def parse_entry_key(value: Any, where: str) -> str:
    """The page key of an ``i:`` row, the row's shape and the key checked (the fields a key
    lookup does not use are not parsed: ``dedup --against`` reads many rows' keys)."""
    r = decode_row(value, where)
    if isinstance(r, list) and len(r) in (5, 6) and isinstance(r[4], str):
        return r[4]
    try:
        return _entry(r).key  # (the error that names what is wrong)
    except (TypeError, ValueError) as e:
        raise damaged(where, "entry", e) from None


def parse_key(value: Any, where: str) -> tuple[int, str | None]:
    """A ``k:`` row: ``[rid, job]`` (for the store's key lookups: a row edited by hand is a
    :class:`StoreError` naming it, not a ``ValueError`` in the middle of a crawl)."""
    r = decode_row(value, where)
    if (
        isinstance(r, list)
        and len(r) == 2
        and type(r[0]) is int
        and r[0] >= 0
        and (r[1] is None or isinstance(r[1], str))
    ):
        return r[0], r[1]
    raise damaged(where, "key", f"not [entry id, job]: {r!r:.40}")


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
    r = decode_row(value, where)
    try:
        if not isinstance(r, dict):
            raise ValueError("not a JSON object")
        missing = [f for f in ("key", "fp", "match", "match_fp", "distance", "t") if f not in r]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        for field in ("key", "match"):
            if not isinstance(r[field], str):
                raise ValueError(f"{field} is not a string: {r[field]!r:.40}")
        return Decision(
            r["key"],
            hex_number(r["fp"], FP_END, "fp"),
            r["match"],
            hex_number(r["match_fp"], FP_END, "match_fp"),
            whole_number(r["distance"], 64, "distance"),
            finite_number(r["t"], "t"),
            text_or_none(r.get("text"), "text"),
            None if r.get("wide") is None else whole_number(r["wide"], 512, "wide"),
        )
    except (TypeError, ValueError) as e:
        raise damaged(where, "decision", e) from None


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
    roots: np.ndarray | None = None  # per row: -1 (an entry), or an alias's kept page's rid

    def only(self, mask: np.ndarray) -> Loaded:
        """The entries where ``mask`` is true (the key filter is not carried over)."""
        keys = None if self.keys is None else self.keys[mask]
        roots = None if self.roots is None else self.roots[mask]
        return Loaded(
            self.rids[mask], self.fps[mask], self.wide[mask], self.has_wide[mask],
            self.times[mask], keys, None, roots,
        )  # fmt: skip

    def with_aliases(self, aliases: Loaded) -> Loaded:
        """The entries and ``aliases`` (whose ``roots`` are set) in one rid order."""
        assert aliases.roots is not None
        roots = np.concatenate([np.full(len(self.rids), -1, dtype=np.int64), aliases.roots])
        rids = np.concatenate([self.rids, aliases.rids])
        order = np.argsort(rids, kind="stable")
        keys = None
        if self.keys is not None and aliases.keys is not None:
            keys = np.concatenate([self.keys, aliases.keys])[order]
        return Loaded(
            rids[order], np.concatenate([self.fps, aliases.fps])[order],
            np.concatenate([self.wide, aliases.wide])[order],
            np.concatenate([self.has_wide, aliases.has_wide])[order],
            np.concatenate([self.times, aliases.times])[order], keys, None, roots[order],
        )  # fmt: skip


def _fast_fields(value: str) -> tuple[int, str, float] | None:
    # '["<16 hex>","<128 hex or empty>",<t>,...': slice instead of parsing JSON (10x faster).
    if not (value.startswith('["') and value[18:21] == '","'):
        return None
    end = 21 if value[21:22] == '"' else 21 + WIDE_HEX
    if value[end : end + 2] != '",':
        return None
    comma = value.find(",", end + 2)
    fp, t = int(value[2:18], 16), float(value[end + 2 : comma])
    if fp < 0 or not math.isfinite(t):  # ("-123…", NaN, 1e999: the full parse says what)
        return None
    return fp, value[21:end], t


def _named_rows(
    rows: sqlite3.Cursor, conn: sqlite3.Connection, path: Path, kind: str = "i"
) -> Iterator[tuple[str, Any]]:
    """``rows`` (``i:`` rows in key order); a value sqlite cannot give as text (bytes that are
    not UTF-8, written by hand) is a :class:`StoreError` naming its row, not the whole store."""
    last = f"{kind}:"
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except sqlite3.OperationalError as e:
            if "decode" not in str(e):
                raise
            found = conn.execute(
                f"SELECT key FROM \"{TABLE}\" WHERE key > ? AND key < '{kind};' ORDER BY key "
                "LIMIT 1",
                (last,),
            ).fetchone()
            where = f"{path}: record {found[0] if found else f'(an {kind}: row)'!r}"
            raise StoreError(f"{where} is damaged (not UTF-8 text); {hint(where)}") from None
        last = row[0]
        yield row


def load_v2(conn: sqlite3.Connection, path: Path, kind: str = "i") -> Loaded:
    """Every ``i:`` row in rid order, in one pass over the table (``kind="a"``: every ``a:``
    row, with ``roots``)."""
    rids: list[int] = []
    fps: list[int] = []
    times: list[float] = []
    wide_hex: list[str] = []
    roots: list[int] = []
    rows = conn.execute(
        f"SELECT key, value FROM \"{TABLE}\" WHERE key >= '{kind}:' AND key < '{kind};' "
        "ORDER BY key"
    )
    for row_key, value in _named_rows(rows, conn, path, kind):
        try:
            fast = _fast_fields(value) if isinstance(value, str) and kind == "i" else None
            if fast is None:
                if kind == "a":
                    e, root = _alias(decode(value, "it"))
                    roots.append(root)
                else:
                    e = _entry(decode(value, "it"))
                fast = (
                    e.fingerprint,
                    "" if e.wide is None else f"{e.wide:0{WIDE_HEX}x}",
                    e.stored_at,
                )
            rid = int(row_key[2:], 16)
        except (StoreError, TypeError, ValueError) as err:
            where = f"{path}: record {row_key!r}"
            raise StoreError(f"{where} is damaged ({err}); {hint(where)}") from None
        rids.append(rid)
        fps.append(fast[0])
        wide_hex.append(fast[1])
        times.append(fast[2])
    n = len(rids)
    has_wide = np.fromiter((bool(w) for w in wide_hex), dtype=bool, count=n)
    try:
        blob = bytes.fromhex("".join(w or "0" * WIDE_HEX for w in wide_hex))
    except ValueError:  # (the fast path slices the wide hex unread: find the row)
        for rid, w in zip(rids, wide_hex, strict=True):
            if w and not HEX_DIGITS.issuperset(w):
                where = f"{path}: record 'i:{rid:012x}'"
                raise StoreError(
                    f"{where} is damaged (the wide fingerprint is not hex digits); {hint(where)}"
                ) from None
        raise
    # hex is big-endian; the in-memory words are little-endian 64-bit words of the integer
    wide = np.frombuffer(blob, dtype=np.uint8).reshape(n, 64)[:, ::-1].copy()
    return Loaded(
        np.array(rids, dtype=np.int64),
        np.array(fps, dtype=np.uint64),
        wide.view("<u8").reshape(n, 8).astype(np.uint64),
        has_wide,
        np.array(times, dtype=np.float64),
        roots=np.array(roots, dtype=np.int64) if kind == "a" else None,
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
    where = f"{path}: record m:state"
    state = decode_row(row[0], where)
    if not isinstance(state, dict):
        raise StoreError(f"{where} is damaged; {hint(where)}")
    for name, value in state.items():  # counters and sequences; the snapshot's token
        if name == "snapshot" or (type(value) is int and value >= 0):
            continue
        raise damaged(f"{path}: record m:state", "state", f"{name} is {value!r:.40}")
    return state
