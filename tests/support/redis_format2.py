"""Writing a format-2 Redis store (the earlier release's layout) at any size, for migration
tests and ``benchmarks/redis_format3_migrate.py``: the format-2 program (``program.SINGLE``,
still the Cluster shards' own) run with format-2 keys and records, as that release's
``import_records`` did. (The small fixture tests/data/redis_format2.jsonl was written by the
release's own store; this is for sizes a fixture file cannot hold.)"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from nearduppipe.fingerprint.rule import Rule
from nearduppipe.index.layout import Layout
from nearduppipe.stores.base import Entry
from nearduppipe.stores.redis import keys as rk
from nearduppipe.stores.redis.codec import encode_entry
from nearduppipe.stores.redis.log import new_epoch
from nearduppipe.stores.redis.program import SINGLE


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
