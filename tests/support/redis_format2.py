"""Writing a format-2 Redis store (the earlier release's layout) at any size, for migration
tests and ``benchmarks/redis_format3_migrate.py``: the format-2 program (:data:`SINGLE`: the
package's shared Lua with format 2's entries, ``redis_entries.lua`` beside this file) run
with format-2 keys and records (:func:`encode_entry`), as that release's ``import_records``
did. (The small fixture tests/data/redis_format2.jsonl was written by the release's own
store; this is for sizes a fixture file cannot hold.) The package only reads format 2, to
migrate it (``nearduppipe/stores/redis/codec.py``, ``migrate.py``)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nearduppipe.fingerprint.rule import Rule
from nearduppipe.index.layout import Layout
from nearduppipe.stores.base import Entry
from nearduppipe.stores.redis import keys as rk
from nearduppipe.stores.redis.log import new_epoch
from nearduppipe.stores.redis.program import Program, read_lua

NO_JOB = b"\xff\xff\xff\xff"


def _read(name: str) -> str:
    here = Path(__file__).with_name(name)
    return here.read_text("utf-8") if here.exists() else read_lua(name)


# the format-2 program (the earlier release's single-node store)
SINGLE = Program(
    ("redis_common.lua", "redis_entries.lua", "redis_search.lua", "redis_check_and_add.lua"),
    "return modes()",
    "single",
    read=_read,
)


def encode_job(job: str | None) -> bytes:
    if job is None:
        return NO_JOB
    raw = job.encode("utf-8", "surrogatepass")
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
    """A format-2 entry record (the layout: ``nearduppipe/stores/redis/codec.py``)."""
    raw_key = key.encode("utf-8")
    parts = [b"\x00" if wide is None else b"\x01", fp.to_bytes(8, "big"), struct.pack("<d", t)]
    if wide is not None:
        parts.append(wide.to_bytes(64, "big"))
    parts += (struct.pack(">H", len(fields) // 4), fields, encode_job(job))
    parts += (struct.pack(">I", len(raw_key)), raw_key)
    parts.append(b"\x00" if text is None else b"\x01" + text.encode("utf-8"))
    return b"".join(parts)


def write_format2(
    client: Any, prefix: str, entries: Iterable[Entry], rule: Rule | None = None
) -> int:
    """A new format-2 store under ``prefix`` holding ``entries`` (pipelined batches of 500);
    how many were written."""
    rule = rule or Rule()
    keys = rk.store_keys(prefix)
    meta = {
        "format": "2",
        "rule": json.dumps(rule.as_dict()),
        "blocks": str(Layout(distance=rule.radius).n_blocks),
        "blocks_auto": "1",
        "epoch": new_epoch(),
        "new_total": "0",
    }
    client.hset(keys[0], mapping=meta)
    script = client.register_script(SINGLE.script)
    head = rk.call_head(rule, None, None, "add", rk.SERVER_KEEP)
    pipe = client.pipeline(transaction=False)
    batch: list[Any] = []
    n = queued = 0
    for e in entries:
        batch += [
            e.key,
            encode_entry(e.fingerprint, e.wide, e.stored_at, b"", e.job, e.key, e.text),
        ]
        n += 1
        if len(batch) == 1000:
            script(keys=keys, args=head + batch, client=pipe)
            batch, queued = [], queued + 1
            if queued == 20:
                pipe.execute()
                queued = 0
    if batch:
        script(keys=keys, args=head + batch, client=pipe)
    pipe.execute()
    return n
