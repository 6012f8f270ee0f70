"""The index columns of a sqlite store as blobs, so that a reopen reads a few blobs instead of
parsing every entry row.

Why: rebuilding the in-memory index from the ``i:`` rows parses one JSON record per page
(about 4 s per million pages). At close, the store writes what the index needs (rids,
fingerprints, wide fingerprints, whether there is one, times; live entries only, in rid order)
into a table of its own, in chunks of a million entries, together with a random token that the
same transaction writes into ``m:state``. Any later commit rewrites ``m:state`` without that
token, so the snapshot is used only if nothing was written since it was taken (by this version
or an older one, which knows nothing of it). It is also checked against the rows it describes
(first and last rid: two index lookups, where counting the rows would scan 10 M of them in
seconds); anything else falls back to the rows. A row deleted by hand from the middle of a
snapshotted store is not noticed at open: the page's entry is reported missing when a check
reaches it.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from ..base import StoreError
from .files import TABLE
from .keys import KeyFilter
from .records import Loaded, key_hashes_v2, load_v2, read_state

__all__ = [
    "SNAPSHOT_TABLE",
    "create_sql",
    "load_index",
    "load_snapshot",
    "new_token",
    "snapshot_statements",
]

SNAPSHOT_TABLE = "neardup_index"
_CHUNK = 1 << 20  # entries per blob: 64 MB of wide fingerprints, far below sqlite's 1 GB limit
_COLUMNS: dict[str, tuple[str, tuple[int, ...]]] = {  # name → (dtype, shape of one entry)
    "rids": ("<i8", ()),
    "fps": ("<u8", ()),
    "wide": ("<u8", (8,)),
    "has_wide": ("|b1", ()),
    "times": ("<f8", ()),
    "keys": ("<u8", ()),
    "roots": ("<i8", ()),  # -1 for an entry; an alias's kept page's rid (records.py, a:)
}


def create_sql() -> str:
    return (
        f'CREATE TABLE IF NOT EXISTS "{SNAPSHOT_TABLE}" '
        "(name TEXT NOT NULL, part INTEGER NOT NULL, value BLOB, PRIMARY KEY (name, part))"
    )


def new_token() -> str:
    return secrets.token_hex(8)


def live_columns(
    n: int, alive: np.ndarray, columns: tuple[np.ndarray, ...], keys: KeyFilter
) -> Loaded:
    """What a snapshot holds of a store's first ``n`` index ids: the live ones' row ids,
    fingerprints, wide fingerprints, flags, times and roots (``columns``, in that order), key
    hashes and the key filter's bits."""
    live = np.asarray(alive[:n], dtype=bool)
    rids, fps, wide, has_wide, times, roots = (np.asarray(c[:n])[live] for c in columns)
    return Loaded(rids, fps, wide, has_wide, times, keys.hashes[:n][live], keys.saved(), roots)


def snapshot_statements(token: str, loaded: Loaded) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that replace the snapshot (run in the transaction that writes the
    token into ``m:state``)."""
    n = len(loaded.rids)
    insert = f'INSERT INTO "{SNAPSHOT_TABLE}" (name, part, value) VALUES (?, ?, ?)'
    header: dict[str, Any] = {"token": token, "n": n, "chunk": _CHUNK, "sums": {}}
    if loaded.key_filter is not None:  # saved as it is: rebuilding it costs seconds at 10 M
        header["filter"] = len(loaded.key_filter)
        out_filter = [(insert, ("filter", 0, loaded.key_filter))]
        header["sums"]["filter"] = _sum(loaded.key_filter)
    else:
        out_filter = []
    blobs: list[tuple[str, tuple[Any, ...]]] = []
    for name, (dtype, _) in _COLUMNS.items():
        column = np.ascontiguousarray(getattr(loaded, name), dtype=dtype)
        header["sums"][name] = _sum(column)
        for part, start in enumerate(range(0, n, _CHUNK)):
            blobs.append((insert, (name, part, column[start : start + _CHUNK].tobytes())))
    return [
        (f'DELETE FROM "{SNAPSHOT_TABLE}"', ()),
        (insert, ("header", 0, json.dumps(header).encode())),
        *out_filter,
        *blobs,
    ]


def _sum(data: np.ndarray | bytes) -> str:
    """A column's (or the key filter's) checksum: a snapshot whose bytes changed since it was
    written (a flipped bit on disk) is not used; the rows decide (sqlite checks no page
    checksums itself)."""
    if isinstance(data, bytes):
        return xxhash.xxh3_64_hexdigest(data)
    return xxhash.xxh3_64_hexdigest(np.ascontiguousarray(data).reshape(-1).view(np.uint8).data)


def load_snapshot(conn: sqlite3.Connection, token: str | None, path: Path) -> Loaded | None:
    """The snapshot, if it is there, was taken at the last commit, and matches the rows."""
    if not token:
        return None
    try:
        row = conn.execute(
            f'SELECT value FROM "{SNAPSHOT_TABLE}" WHERE name = ? AND part = 0', ("header",)
        ).fetchone()
        if row is None:
            return None
        header = json.loads(bytes(row[0]))
        sums = header.get("sums")
        if header.get("token") != token or header.get("chunk") != _CHUNK or not sums:
            return None  # (a snapshot without checksums, from before they were written, too)
        n = int(header["n"])
        columns: dict[str, np.ndarray] = {}
        for name, (dtype, shape) in _COLUMNS.items():
            if name == "roots" and name not in sums:  # (a snapshot from before aliases)
                columns[name] = np.full(n, -1, dtype=np.int64)
                continue
            column = np.empty((n, *shape), dtype=dtype)
            flat = column.reshape(-1).view(np.uint8)
            at = 0
            blobs = conn.execute(
                f'SELECT value FROM "{SNAPSHOT_TABLE}" WHERE name = ? ORDER BY part', (name,)
            )
            for (blob,) in blobs:
                if at + len(blob) > len(flat):
                    return None
                flat[at : at + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
                at += len(blob)
            if at != len(flat) or _sum(column) != sums.get(name):
                return None
            columns[name] = column
        rids = columns["rids"]
        saved = conn.execute(
            f'SELECT value FROM "{SNAPSHOT_TABLE}" WHERE name = ? AND part = 0', ("filter",)
        ).fetchone()
        key_filter = bytes(saved[0]) if saved and len(saved[0]) == header.get("filter") else None
        if key_filter is not None and _sum(key_filter) != sums.get("filter"):
            key_filter = None  # (rebuilt from the key hashes)
        # the first and last entry and alias rows (index lookups; a count would scan every row)
        ends = [
            conn.execute(
                f"SELECT key FROM \"{TABLE}\" WHERE key >= '{kind}:' AND key < '{kind};' "
                f"ORDER BY key {way} LIMIT 1"
            ).fetchone()
            for kind in "ia"
            for way in ("ASC", "DESC")
        ]
    except (sqlite3.DatabaseError, ValueError, KeyError, TypeError):
        return None  # no snapshot table, or a damaged snapshot: the rows decide
    roots = columns["roots"]
    want: list[tuple[str] | None] = []
    for kind, mask in (("i", roots < 0), ("a", roots >= 0)):
        some = rids[mask]
        want += [(f"{kind}:{some[0]:012x}",), (f"{kind}:{some[-1]:012x}",)] if len(some) else [
            None, None]  # fmt: skip
    if ends != want:
        return None
    if n > 1 and not bool(np.all(rids[1:] > rids[:-1])):
        return None
    return Loaded(
        rids.astype(np.int64, copy=False),
        columns["fps"].astype(np.uint64, copy=False),
        columns["wide"].astype(np.uint64, copy=False),
        columns["has_wide"].astype(bool, copy=False),
        columns["times"].astype(np.float64, copy=False),
        columns["keys"].astype(np.uint64, copy=False),
        key_filter,
        roots.astype(np.int64, copy=False),
    )


def load_index(conn: sqlite3.Connection, path: Path) -> tuple[dict[str, Any], str | None, Loaded]:
    """The ``m:state`` record, the token of the snapshot the index columns were read from
    (``None``: it was stale or absent, and they were read from the rows), and the columns."""
    state = read_state(conn, path)
    token = state.get("snapshot")
    loaded = load_snapshot(conn, token if isinstance(token, str) else None, path)
    if loaded is not None:
        return state, token, loaded
    try:
        loaded = load_v2(conn, path)
        aliases = load_v2(conn, path, "a")
        loaded = loaded.with_aliases(aliases)
        keys, linked = key_hashes_v2(conn, path, loaded.rids)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: damaged store ({e}); nothing was changed") from e
    loaded.keys = keys
    if not bool(linked.all()):  # entry rows no key points to: not pages of this store
        loaded = loaded.only(linked)
    return state, None, loaded
