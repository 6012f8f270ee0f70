"""Format 1 → format 2, in place, in one transaction.

Format 1 kept one ``e:<id>`` row per stored fingerprint, several per key when a page was seen
again, and no wide fingerprint. Migration keeps the newest entry of each key (that is what a
format-2 store would hold), writes it as a ``k:``/``i:`` pair with no wide fingerprint (so the
rule judges it by the 64-bit distance at ``legacy_distance``), keeps the decisions as they are
(their records are a subset of format 2's), and removes the ``e:`` rows. It runs before the
store's writer opens, under the store's lock; a crash leaves format 1 untouched (one
transaction).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from ...fingerprint.rule import Rule
from ..base import Store, StoreError
from ..scope import format1_rule
from .files import (
    TABLE,
    FileLock,
    decode,
    encode,
    format_for,
    not_a_store_file,
    prepare_path,
    read_connection,
    stored_format,
)
from .records import entry_record, read_v1

__all__ = ["migrate_v1", "prepare_file", "read_only_view", "rule_of"]

logger = logging.getLogger("nearduppipe")


def rule_of(conn: sqlite3.Connection, where: str) -> Rule | None:
    """The rule a store was created with (``None``: none recorded, e.g. format 1); a damaged
    one is a :class:`StoreError` naming the store ``where``."""
    try:
        row = conn.execute(f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:rule",)).fetchone()
    except sqlite3.OperationalError:
        return None  # no table yet
    if row is None:
        return None
    try:
        raw = decode(row[0], "record m:rule")
    except StoreError as e:
        raise StoreError(f"{where}: {e}") from None
    try:
        return Rule.from_dict(raw)
    except ValueError as e:
        raise StoreError(f"{where}: record m:rule is damaged ({e})") from None


def prepare_file(
    path: Path, lock: FileLock, read_only: bool, reset: bool, rule: Rule | None
) -> None:
    """The store file, ready for a store to open: read-only, it must exist (and is never
    changed); else its directory is made, the lock's sidecar taken, an empty file being reset
    removed, and a format-1 file not being reset migrated in place."""
    if read_only:
        if not path.is_file():
            raise StoreError(f"{path}: {not_a_store_file(path)}")
        stored_format(path)  # (an unreadable or unknown format is an error here)
        return
    prepare_path(path)
    lock.acquire_sidecar()
    if not path.exists():
        return
    if reset and path.stat().st_size == 0:
        path.unlink()
    elif stored_format(path) == 1 and not reset:
        migrate_v1(path, rule)


def migrate_v1(path: Path, rule: Rule | None) -> None:
    started = time.monotonic()
    rule = format1_rule(rule)  # (an existing store: no aliases unless asked; version 1)
    version = format_for(rule.aliases)
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("BEGIN IMMEDIATE")
        entries, decisions = read_v1(conn, path)
        n_decisions = sum(1 for _ in decisions)
        rows = [("k:" + e.key, encode([rid, None])) for rid, e in enumerate(entries)]
        rows += [
            (f"i:{rid:012x}", entry_record(e.fingerprints, e.stored_at, None, e.key, e.text))
            for rid, e in enumerate(entries)
        ]
        state = {
            "rseq": len(entries),
            "dseq": n_decisions,
            "dmin": 0,
            "decisions_total": n_decisions,
        }
        rows += [
            ("m:format", encode(version)),
            ("m:rule", encode(rule.as_dict())),
            ("m:state", encode(state)),
        ]
        conn.execute(f"DELETE FROM \"{TABLE}\" WHERE key >= 'e:' AND key < 'e;'")
        conn.executemany(f'REPLACE INTO "{TABLE}" (key, value) VALUES (?, ?)', rows)
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(
            f"{path}: could not migrate from store format 1 ({e}); nothing was changed"
        ) from e
    finally:
        conn.close()
    logger.info(
        "nearduppipe: %s: migrated from store format 1 to %d: %d entries (newest per key), "
        "%d decisions, in %.1f s",
        path,
        version,
        len(entries),
        n_decisions,
        time.monotonic() - started,
    )


def read_only_view(path: Path, uri: str, rule: Rule | None, options: dict[str, Any]) -> Store:
    """A format-1 store opened read-only: converted in memory (the newest entry per key, no
    wide fingerprints), never written. Its ``format_version`` says 1."""
    from ..memory import MemoryStore

    conn = read_connection(path)
    try:
        entries, decisions = read_v1(conn, path)
        held = list(decisions)
    finally:
        conn.close()
    store = MemoryStore(uri, format1_rule(rule), ttl=options.get("ttl"), max_decisions=None)
    store.import_records(entries, held)
    store.read_only = True
    store.format_version = 1
    return store
