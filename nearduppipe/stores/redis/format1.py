"""Reading format-1 Redis stores (nearduppipe before the wide fingerprint).

Format 1 kept, per TTL generation ``G``, block tables ``{P}:g<G>:t<T>:<hex>`` and an entries
hash ``{P}:g<G>:e`` (entry sequence number -> JSON ``[fp hex, stored_at, key, text?]``), and
could hold several entries for one key. Its tables cannot answer a radius-8 search, so a
format-2 store never uses them: opened for writing, the store is migrated (the newest entry per
key is kept and re-indexed; the entries have no wide fingerprint, so the rule judges them at the
legacy 64-bit distance); opened read-only, its entries are read into memory and searched there.
The decisions list (JSON items) is kept as it is: :func:`decode_decision` reads both formats.
"""

from __future__ import annotations

import json
from typing import Any

from ...fingerprint.rule import Rule
from ...index.layout import Layout
from ..base import Entry
from .keys import format1_key_pattern, key
from .log import new_epoch

__all__ = ["format1_keys", "read_format1", "switch_format1"]


def format1_keys(client: Any, prefix: str) -> list[bytes]:
    """Every key of the format-1 store ``prefix`` that format 2 does not use: its generation
    keys (exact: no other prefix's) and its sequence counter ``{P}:seq``."""
    pattern, exact = format1_key_pattern(prefix)
    found = [k for k in client.scan_iter(match=pattern, count=1000) if exact.match(k)]
    seq = key(prefix, "seq").encode()
    return [*found, seq] if client.exists(seq) else found


def read_format1(client: Any, prefix: str) -> list[Entry]:
    """The newest entry of each key (by time, then sequence number), oldest first."""
    rows: list[tuple[float, int, Entry]] = []
    for name in format1_keys(client, prefix):
        if not name.endswith(b":e"):
            continue
        for seq, record in client.hscan_iter(name, count=1000):
            fp_hex, t, key, *text = json.loads(record)
            rows.append((float(t), int(seq), Entry(key, int(fp_hex, 16), float(t), *text[:1])))
    newest: dict[str, tuple[float, int, Entry]] = {}
    for row in rows:
        old = newest.get(row[2].key)
        if old is None or row[:2] > old[:2]:
            newest[row[2].key] = row
    return [row[2] for row in sorted(newest.values(), key=lambda r: r[:2])]


def switch_format1(client: Any, prefix: str, rule: Rule, layout: Layout, version: int) -> str:
    """The end of a format-1 store's migration at open, once its entries are written as
    format 3 (names format 1 never used): switch the meta in one transaction, then drop the
    old keys. A crash before the switch leaves a format-1 store that the next open migrates
    again. Returns the new epoch (the client's ids, read while writing, are the store's)."""
    n_decisions = int(client.llen(key(prefix, "d")))
    epoch = new_epoch()
    pipe = client.pipeline(transaction=True)
    pipe.hdel(key(prefix, "meta"), "bits", "distance")
    pipe.hset(
        key(prefix, "meta"),
        mapping={
            "format": str(version),  # (3, or 4 for a store that keeps aliases: base.py)
            "rule": json.dumps(rule.as_dict()),
            "blocks": str(layout.n_blocks),
            "decisions_total": str(n_decisions),
            "epoch": epoch,
            "new_total": "0",
        },
    )
    pipe.execute()
    old = format1_keys(client, prefix)
    for i in range(0, len(old), 1000):
        client.unlink(*old[i : i + 1000])
    return epoch
