"""The rule a store records, read straight from its sqlite file or Redis hash (not through the
package): what an older release would read."""

from __future__ import annotations

import json
import sqlite3
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit


def recorded_rule(store: str) -> dict[str, object]:
    if store.startswith("redis"):
        import redis

        parts = urlsplit(store)
        query = parse_qs(parts.query)
        prefix = query.pop("prefix")[0]
        url = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        raw = redis.Redis.from_url(url).hget("{" + prefix + "}:meta", "rule")
        assert raw is not None
        return dict(json.loads(raw))
    with sqlite3.connect(store) as db:
        [(value,)] = db.execute("SELECT value FROM neardup WHERE key = 'm:rule'").fetchall()
    return dict(json.loads(value))
