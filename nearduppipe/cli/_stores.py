"""Opening stores from the command line: the store's own layout, never a guessed one.

A store records the layout it was built with (distance ``k`` and blocks). The CLI passes a
layout only when the user gave one, to create a store or to override on purpose, so a store
written by a crawl at ``NEARDUP_DISTANCE = 4`` is read as such. Read-only commands open
``read_only=True``: they never write, not even layout metadata on an empty Redis prefix.

Until the stores read their layout themselves (store format 2), :func:`open_cli_store` reads a
Redis store's ``{prefix}:meta`` hash here and passes it on; the shim is selected by looking at
``open_store``'s signature and is a no-op afterwards.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from ..stores import Store, StoreError, open_store
from ..stores.base import _scheme
from ._io import CliError, redact

__all__ = [
    "CRAWL_DISTANCE",
    "RedisPrefix",
    "is_redis",
    "known_layout",
    "list_redis_prefixes",
    "open_cli_store",
    "uri_prefix",
]

CRAWL_DISTANCE = 4  # NEARDUP_DISTANCE's default: what a store made for a crawl should use
_REDIS_SCHEMES = ("redis", "rediss", "unix")


def is_redis(uri: str) -> bool:
    return _scheme(uri) in _REDIS_SCHEMES


def uri_prefix(uri: str) -> str | None:
    """The ``?prefix=`` of a Redis URI, if any."""
    return dict(parse_qsl(uri.partition("?")[2])).get("prefix") or None


def _stores_read_their_layout() -> bool:
    """True once ``open_store(uri)`` without layout arguments takes the store's (format 2)."""
    parameter = inspect.signature(open_store).parameters.get("distance")
    return parameter is None or parameter.default is None


def _redis_takes_read_only() -> bool:
    from ..stores.redis import RedisStore

    return "read_only" in inspect.signature(RedisStore.__init__).parameters


def _client(uri: str) -> Any:
    try:
        import redis
    except ImportError:
        raise CliError(
            f"{redact(uri)}: Redis stores need redis-py: pip install 'nearduppipe[redis]'"
        ) from None
    base, _, query = uri.partition("?")
    rest = "&".join(f"{k}={v}" for k, v in parse_qsl(query) if k not in ("prefix", "ttl"))
    try:
        return redis.Redis.from_url(
            base + ("?" + rest if rest else ""), socket_timeout=5, socket_connect_timeout=5
        )
    except ValueError as e:
        raise CliError(f"{redact(uri)}: {e}") from None


@dataclass(frozen=True)
class RedisPrefix:
    prefix: str
    meta: dict[str, str]

    @property
    def distance(self) -> int | None:
        value = self.meta.get("distance")
        return int(value) if value and value.isdigit() else None

    @property
    def blocks(self) -> int | None:
        value = self.meta.get("blocks")
        return int(value) if value and value.isdigit() else None


def _redis_call(uri: str, what: str, fn: Any) -> Any:
    import redis

    try:
        return fn()
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise CliError(f"{redact(uri)}: cannot reach Redis to {what}: {e}") from None
    except redis.RedisError as e:
        raise CliError(f"{redact(uri)}: {what}: {e}") from None


def list_redis_prefixes(uri: str) -> list[RedisPrefix]:
    """Every store on the server: SCAN for the ``{prefix}:meta`` hash each store writes."""
    client = _client(uri)
    try:

        def scan() -> list[RedisPrefix]:
            found = []
            for raw in client.scan_iter(match="{*}:meta", count=1000):
                name = raw.decode("utf-8", "replace")
                if not (name.startswith("{") and name.endswith("}:meta")):
                    continue
                meta = client.hgetall(raw)
                found.append(
                    RedisPrefix(
                        name[1 : -len("}:meta")],
                        {k.decode(): v.decode("utf-8", "replace") for k, v in meta.items()},
                    )
                )
            return sorted(found, key=lambda p: p.prefix)

        result: list[RedisPrefix] = _redis_call(uri, "list its stores", scan)
        return result
    finally:
        client.close()


def _redis_meta(uri: str, prefix: str) -> RedisPrefix | None:
    client = _client(uri)
    try:
        meta = _redis_call(uri, "read the store", lambda: client.hgetall("{" + prefix + "}:meta"))
    finally:
        client.close()
    if not meta:
        return None
    return RedisPrefix(prefix, {k.decode(): v.decode("utf-8", "replace") for k, v in meta.items()})


def resolve_redis_prefix(uri: str, prefix: str | None) -> str:
    """The prefix to read: the one given, else the server's only store; several or none is a
    one-line error listing what exists (a silent ``neardup:default`` would show 0 entries)."""
    prefix = prefix or uri_prefix(uri)
    if prefix:
        return prefix
    found = list_redis_prefixes(uri)
    if len(found) == 1:
        return found[0].prefix
    names = ", ".join(p.prefix for p in found) or "none"
    raise CliError(
        f"{redact(uri)}: name the store with ?prefix=… or --prefix (stores on this server: {names})"
    )


def open_cli_store(
    uri: str,
    *,
    read_only: bool,
    distance: int | None = None,
    blocks: int | None = None,
    **options: Any,
) -> Store:
    """Open ``uri`` with the layout the store records; ``distance``/``blocks`` only when the
    user gave them (a contradiction with the store is the store's one-line error)."""
    if not isinstance(uri, str) or not uri.strip():
        raise CliError("a store URI or sqlite path is required")
    if distance is not None:
        options["distance"] = distance
    if blocks is not None:
        options["blocks"] = blocks
    if options.get("prefix") and not is_redis(uri):
        raise CliError(f"--prefix {options['prefix']}: only Redis stores have a key prefix")
    if is_redis(uri):
        prefix = options.pop("prefix", None) or uri_prefix(uri)
        if read_only:
            prefix = resolve_redis_prefix(uri, prefix)
        if prefix:
            options["prefix"] = prefix
        stored = _redis_meta(uri, prefix) if prefix else None
        if stored is None and read_only and prefix:
            # Reading a prefix that holds no store is a typo far more often than a wish to see
            # zeros; say which stores exist instead (and write nothing).
            names = ", ".join(p.prefix for p in list_redis_prefixes(uri)) or "none"
            raise CliError(
                f"{redact(uri)}: no store with prefix {prefix!r} (stores on this server: {names})"
            )
        if stored is not None and not _stores_read_their_layout():  # shim: module docstring
            if distance is None and stored.distance is not None:
                options["distance"] = stored.distance
            if blocks is None and distance is None and stored.blocks is not None:
                options["blocks"] = stored.blocks
        if read_only and _redis_takes_read_only():
            options["read_only"] = True
    elif read_only:
        options["read_only"] = True
    try:
        return open_store(uri, **options)
    except StoreError as e:
        raise CliError(redact(str(e))) from None
    except ValueError as e:  # an impossible layout (e.g. fewer blocks than distance + 1)
        raise CliError(f"{redact(uri)}: --distance/--blocks: {e}") from None


def known_layout(store: Store) -> tuple[int, int | None] | None:
    """``(distance, blocks)`` the store was built with, when it records one (a format-1 sqlite
    store does not: its index is rebuilt at open with whatever layout the opener asks)."""
    layout = getattr(store, "layout", None)
    if layout is None and _stores_read_their_layout():
        index = getattr(store, "_index", None)
        layout = getattr(index, "layout", None)
    if layout is None:
        return None
    blocks = getattr(layout, "n_blocks", None)
    return int(store.distance), int(blocks) if blocks is not None else None
