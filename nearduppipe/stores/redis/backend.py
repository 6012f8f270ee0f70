"""The Redis backends' objects (:class:`~nearduppipe.stores.backend.Backend`): one for a single
server (``redis://``, ``rediss://``, ``unix://``), one for a Redis Cluster (``redis+cluster://``,
``rediss+cluster://``).

A server holds many stores, each under its key prefix (``{prefix}:meta`` marks one). Besides
opening a store, these answer what the command line asks a server: the stores it holds, a
store's meta, which server a URI reaches, a store's damaged records and the keys a copy leaves
(one server only), a migration. They read with a client of their own, made per question (5 s
timeouts), and never write (a migration writes, fenced by its lock). redis-py is imported when a
server is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl

from ..backend import MIGRATION, Backend, Damage, Migration, StoreListing, register_backend
from ..base import Store, StoreError
from ..redaction import redact
from . import keys as rk
from .cluster import CLUSTER_OPTIONS, open_cluster
from .codec import DamagedRecord
from .store import open_single

if TYPE_CHECKING:
    from ...fingerprint.rule import Rule

__all__ = ["RedisBackend", "RedisClusterBackend"]

_T = TypeVar("_T")


def _client(uri: str) -> Any:
    """A redis-py client for the server of ``uri`` (its ``prefix`` and ``ttl`` left out)."""
    try:
        import redis
    except ImportError:
        raise StoreError(
            f"{redact(uri)}: Redis stores need redis-py: pip install 'nearduppipe[redis]'"
        ) from None
    base, _, query = uri.partition("?")
    rest = "&".join(f"{k}={v}" for k, v in parse_qsl(query) if k not in ("prefix", "ttl"))
    scheme, sep, tail = base.partition("://")
    try:
        if scheme.lower().endswith("+cluster"):  # SCAN then reads every master
            from redis.cluster import RedisCluster

            return RedisCluster.from_url(
                scheme.lower().split("+")[0] + sep + tail + ("?" + rest if rest else ""),
                socket_timeout=5,
                socket_connect_timeout=5,
            )
        return redis.Redis.from_url(
            base + ("?" + rest if rest else ""), socket_timeout=5, socket_connect_timeout=5
        )
    except ValueError as e:
        raise StoreError(f"{redact(uri)}: {e}") from None
    except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
        # (a cluster URI for a server that is not one, or unreachable; redis-py's cluster
        # errors are not RedisErrors)
        hint = ""
        if "not enabled" in str(e):
            hint = ": this server is not a Redis Cluster; use redis:// for a single server"
        raise StoreError(f"{redact(uri)}: {e}{hint}") from None


def _ask(uri: str, what: str, fn: Callable[[Any], _T]) -> _T:
    """``fn(client)`` with a client of its own; a Redis error is one line saying ``what``."""
    client = _client(uri)  # (first: it says when redis-py is missing)
    import redis

    try:
        return fn(client)
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise StoreError(f"{redact(uri)}: cannot reach Redis to {what}: {e}") from None
    except redis.RedisError as e:
        raise StoreError(f"{redact(uri)}: {what}: {e}") from None
    finally:
        client.close()


def _text(meta: dict[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode("utf-8", "replace") for k, v in meta.items()}


def _cli_bytes(raw: bytes) -> str:
    """A binary field as redis-cli takes it: ``"\\x00\\x00…"``."""
    return '"' + "".join(f"\\x{b:02x}" for b in raw) + '"'


class RedisBackend(Backend):
    """``redis://``, ``rediss://``, ``unix://``: one server."""

    name = "redis"
    prefixed = True
    cluster = False  # (a store's meta says cluster=1 when a Redis Cluster store wrote it)

    def __init__(self, factory: Callable[..., Store] = open_single) -> None:
        self.factory = factory

    def open(self, uri: str, *, rule: Rule | None = None, **options: Any) -> Store:
        return self.factory(uri, rule=rule, **options)

    def accepts(self, option: str) -> bool:
        return option in rk.OPTIONS

    def list_stores(self, uri: str) -> list[StoreListing]:
        """SCAN for the ``{prefix}:meta`` hash each store writes (not a Cluster store's shards,
        nor a store of the other kind: a Cluster store on a ``redis://`` URI or the reverse).
        A key of that name that is not a hash is another application's, not a store: skipped."""
        import redis

        def scan(client: Any) -> list[StoreListing]:
            found = []
            for raw in client.scan_iter(match="{*}:meta", count=1000):
                name = raw.decode("utf-8", "replace")
                if not (name.startswith("{") and name.endswith("}:meta")):
                    continue
                try:
                    meta = client.hgetall(raw)
                except redis.ResponseError as e:  # (WRONGTYPE: a string, list, … of that name)
                    if "WRONGTYPE" not in str(e):
                        raise
                    continue
                if b"shard_of" in meta:  # a shard of a Redis Cluster store, not a store
                    continue
                if (meta.get(b"cluster") == b"1") != self.cluster:  # the other scheme's
                    continue
                found.append(StoreListing(name[1 : -len("}:meta")], _text(meta)))
            return sorted(found, key=lambda p: p.name)

        return _ask(uri, "list its stores", scan)

    def meta(self, uri: str, name: str | None = None) -> dict[str, str] | None:
        prefix = name or "neardup:default"
        meta = _ask(uri, "read the store", lambda c: c.hgetall("{" + prefix + "}:meta"))
        return _text(meta) if meta else None

    def identity(self, uri: str, name: str) -> Hashable:
        def ask(client: Any) -> tuple[Any, ...]:
            db = client.connection_pool.connection_kwargs.get("db", 0)
            return ("server", client.info("server")["run_id"], int(db), name)

        return _ask(uri, "tell which server it is", ask)

    def is_damage(self, error: BaseException) -> bool:
        return isinstance(error, DamagedRecord)

    def damaged_records(self, uri: str, name: str | None = None) -> list[Damage]:
        """The entry records of the bucket hashes, then the decisions list."""
        from .buckets import damaged
        from .codec import decode_decision

        prefix = name or "neardup:default"
        base = "{" + prefix + "}"

        def scan(client: Any) -> list[Damage]:
            found = []
            for key, field, e in damaged(client, prefix):  # (format 3: the bucket hashes)
                fix = f"redis-cli HDEL '{key}' {_cli_bytes(field)}"
                found.append(Damage(f"{key} field {_cli_bytes(field)}", str(e), fix))
            n = int(client.llen(f"{base}:d"))
            for start in range(0, n, 1000):
                for i, raw in enumerate(client.lrange(f"{base}:d", start, start + 999), start):
                    try:
                        decode_decision(raw)
                    except DamagedRecord as e:
                        lset, lrem = f"LSET '{base}:d' {i} gone", f"LREM '{base}:d' 1 gone"
                        fix = f"redis-cli {lset}; redis-cli {lrem}"
                        found.append(Damage(f"{base}:d item {i}", str(e), fix))
            return found

        return _ask(uri, "find the damaged records", scan)

    def leftovers(self, uri: str, name: str | None, store: Store, copied: int) -> list[str]:
        base = "{" + (name or "neardup:default") + "}"

        def scan(client: Any) -> list[bytes]:
            pattern = rk.glob_escape(base) + ":*"
            names = {f"{base}:{n}".encode() for n in rk.FIXED_NAMES}
            return sorted(k for k in client.scan_iter(match=pattern, count=1000) if k not in names)

        unknown = _ask(uri, "list the store's keys", scan)
        out = []
        if unknown:
            first = unknown[0].decode("utf-8", "replace")
            out.append(
                f"{len(unknown)} key(s) of no kind a store writes (the first: {first!r:.60}) "
                "were not copied"
            )
        pages = len(store)
        if pages != copied:
            out.append(
                f"the store counts {pages} pages ({base}:meta live) but held {copied} entry "
                f"records ({base}:b…): the copy holds the {copied}"
            )
        return out

    def migrate(self, uri: str, name: str | None = None, how: Migration = MIGRATION) -> int:
        from .migrate import migrate

        return migrate(uri, name, **how.options())


class RedisClusterBackend(RedisBackend):
    """``redis+cluster://``, ``rediss+cluster://``: a store spread over a Redis Cluster's
    masters. Its damaged records and a copy's leftovers are not looked for (its keys are
    spread over shards)."""

    name = "redis cluster"
    cluster = True

    def __init__(self, factory: Callable[..., Store] = open_cluster) -> None:
        super().__init__(factory)

    def accepts(self, option: str) -> bool:
        return option in CLUSTER_OPTIONS

    def identity(self, uri: str, name: str) -> Hashable:
        def ask(client: Any) -> tuple[Any, ...]:
            nodes = client.cluster_nodes()
            return ("cluster", frozenset(n["node_id"] for n in nodes.values()), name)

        return _ask(uri, "tell which server it is", ask)

    damaged_records = Backend.damaged_records
    leftovers = Backend.leftovers

    def migrate(self, uri: str, name: str | None = None, how: Migration = MIGRATION) -> int:
        from .cluster_migrate import migrate_cluster

        return migrate_cluster(uri, name, **how.options())


for _scheme in ("redis", "rediss", "unix"):
    register_backend(_scheme, RedisBackend())
for _scheme in ("redis+cluster", "rediss+cluster"):
    register_backend(_scheme, RedisClusterBackend())
