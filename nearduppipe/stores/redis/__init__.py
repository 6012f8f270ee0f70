"""The Redis backends: ``redis://…`` (:mod:`.store`) and ``redis+cluster://…`` (:mod:`.cluster`),
one index shared by many processes and machines.

Importing them needs no Redis client: redis-py (the ``[redis]`` extra) is imported when a store
is opened. :mod:`.backend` holds their backend objects (listing a server's stores, migrations,
…). The Lua program (``*.lua`` here) runs each check atomically on the server.
"""

from __future__ import annotations

from ..base import StoreUnavailable
from .backend import RedisBackend, RedisClusterBackend
from .cluster import RedisClusterStore
from .store import RedisStore

__all__ = [
    "RedisBackend",
    "RedisClusterBackend",
    "RedisClusterStore",
    "RedisStore",
    "StoreUnavailable",
]
