"""Opening stores from the command line: the store's own rule and layout, never a guessed one.

A store records the rule it was built with (similarity, 64-bit radius, wide bits). The CLI
passes a rule only when the user gave one (``--similarity``, ``--paper``, ``--distance``), to
create a store or to override on purpose. Read-only commands open ``read_only=True``: they never
write, not even metadata on an empty Redis prefix.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ..fingerprint.rule import Rule
from ..stores import Store, StoreError, open_store
from ..stores.base import _scheme
from ._io import CliError, bounded_int, redact

__all__ = [
    "RedisPrefix",
    "add_rule_args",
    "is_redis",
    "list_redis_prefixes",
    "open_cli_store",
    "redis_store_identity",
    "rule_from_args",
    "sqlite_file",
    "uri_param",
    "uri_prefix",
]

_REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def is_redis(uri: str) -> bool:
    return _scheme(uri) in _REDIS_SCHEMES


def uri_param(uri: str, name: str) -> str | None:
    """A query parameter of a Redis URI (``?prefix=``, ``?ttl=``), if any."""
    return dict(parse_qsl(uri.partition("?")[2])).get(name) or None


def uri_prefix(uri: str) -> str | None:
    """The ``?prefix=`` of a Redis URI, if any."""
    return uri_param(uri, "prefix")


def _client(uri: str) -> Any:
    try:
        import redis
    except ImportError:
        raise CliError(
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
        raise CliError(f"{redact(uri)}: {e}") from None
    except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
        # (a cluster URI for a server that is not one, or unreachable; redis-py's cluster
        # errors are not RedisErrors)
        hint = ""
        if "not enabled" in str(e):
            hint = ": this server is not a Redis Cluster; use redis:// for a single server"
        raise CliError(f"{redact(uri)}: {e}{hint}") from None


@dataclass(frozen=True)
class RedisPrefix:
    prefix: str
    meta: dict[str, str]


def add_rule_args(p: argparse.ArgumentParser, purpose: str) -> None:
    """Flags that state a rule; all default to None (the store's, or the crawl default's)."""
    g = p.add_argument_group("decision rule " + purpose)
    g.add_argument(
        "--similarity",
        type=float,
        default=None,
        metavar="COS",
        help="cosine above which pages are near-duplicates (0.5 to 1)",
    )
    g.add_argument(
        "--paper",
        action="store_true",
        help="the paper's rule: 64-bit SimHash within --distance (default 3), no wide verification",
    )
    g.add_argument(
        "--distance",
        type=bounded_int(0, 12),
        default=None,
        metavar="K",
        help="64-bit radius: candidates (or, with --paper, the decision)",
    )


def rule_from_args(args: argparse.Namespace) -> Rule | None:
    """The rule the flags state, or None when none was given."""
    similarity = getattr(args, "similarity", None)
    paper = getattr(args, "paper", False)
    distance = getattr(args, "distance", None)
    if similarity is None and not paper and distance is None:
        return None
    if paper and similarity is not None:
        raise CliError("--paper and --similarity contradict each other")
    try:
        if paper:
            return Rule.paper(3 if distance is None else distance)
        if similarity is not None and not 0.5 <= similarity <= 1:
            raise ValueError(f"--similarity must be between 0.5 and 1, not {similarity}")
        return Rule(
            similarity=0.93 if similarity is None else similarity,
            radius=8 if distance is None else distance,
        )
    except ValueError as e:
        raise CliError(str(e)) from None


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
    cluster = _scheme(uri).endswith("+cluster")
    try:

        def scan() -> list[RedisPrefix]:
            found = []
            for raw in client.scan_iter(match="{*}:meta", count=1000):
                name = raw.decode("utf-8", "replace")
                if not (name.startswith("{") and name.endswith("}:meta")):
                    continue
                meta = client.hgetall(raw)
                if b"shard_of" in meta:  # a shard of a Redis Cluster store, not a store
                    continue
                if (meta.get(b"cluster") == b"1") != cluster:  # opened by the other scheme
                    continue
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


def _recorded_ttl(uri: str, prefix: str | None) -> float | None:
    """The TTL an existing store records, which a command that writes keeps (a writer with
    another TTL is refused: stores/ttl_rule.py); None: none recorded, or no store yet."""
    from ..stores.ttl_rule import decode_ttl

    text: str | None = None
    if is_redis(uri):
        found = _redis_meta(uri, prefix) if prefix else None
        text = None if found is None else found.meta.get("ttl")
    elif (path := sqlite_file(uri)) and os.path.isfile(path):
        import sqlite3

        from ..stores.sqlite.files import TABLE, decode

        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute(f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:ttl",)).fetchone()
        except sqlite3.Error:
            row = None  # (no table yet, or not a store: the open says what is wrong)
        finally:
            conn.close()
        text = None if row is None else str(decode(row[0], f"{path}: record m:ttl"))
    return None if text is None else decode_ttl(text, redact(uri))


def sqlite_file(uri: str) -> str | None:
    """The file of a sqlite store URI or path (``None`` for other backends)."""
    if _scheme(uri) != "sqlite":
        return None
    from ..stores.sqlite.store import sqlite_path

    try:
        return str(sqlite_path(uri))
    except Exception as e:  # a malformed sqlite URI
        raise CliError(f"{uri}: {e}") from None


def redis_store_identity(uri: str, prefix: str) -> tuple[Any, ...]:
    """What names one Redis store whatever the URI's spelling (``localhost`` or ``127.0.0.1``,
    a prefix in the URI or given apart): the server's run id and database, or the ids of a
    cluster's nodes, with the prefix."""

    def ask() -> tuple[Any, ...]:
        if _scheme(uri).endswith("+cluster"):
            nodes = client.cluster_nodes()
            return ("cluster", frozenset(n["node_id"] for n in nodes.values()), prefix)
        db = client.connection_pool.connection_kwargs.get("db", 0)
        return ("server", client.info("server")["run_id"], int(db), prefix)

    client = _client(uri)
    try:
        identity: tuple[Any, ...] = _redis_call(uri, "tell which server it is", ask)
        return identity
    finally:
        client.close()


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
    rule: Rule | None = None,
    must_exist: bool = False,
    **options: Any,
) -> Store:
    """Open ``uri`` with the rule the store records; ``rule`` only when the user gave one (a
    contradiction with the store's layout is the store's one-line error). Read-only opens,
    and writes with ``must_exist``, refuse a store that does not exist (a typo would make
    one)."""
    if not isinstance(uri, str) or not uri.strip():
        raise CliError("a store URI or sqlite path is required")
    if options.get("prefix") and not is_redis(uri):
        raise CliError(f"--prefix {options['prefix']}: only Redis stores have a key prefix")
    if is_redis(uri):
        prefix = options.pop("prefix", None) or uri_prefix(uri)
        if read_only or must_exist:
            prefix = resolve_redis_prefix(uri, prefix)
            if _redis_meta(uri, prefix) is None:
                # Reading a prefix that holds no store is a typo far more often than a wish to
                # see zeros; say which stores exist instead (and write nothing).
                names = ", ".join(p.prefix for p in list_redis_prefixes(uri)) or "none"
                raise CliError(
                    f"{redact(uri)}: no store with prefix {prefix!r} (stores on this server: "
                    f"{names})"
                )
        if prefix:
            options["prefix"] = prefix
    elif must_exist and (path := sqlite_file(uri)) and not os.path.isfile(path):
        raise CliError(f"{path}: no such store file")
    if read_only:
        options["read_only"] = True
    try:
        if not read_only and "ttl" not in options and not uri_param(uri, "ttl"):
            recorded = _recorded_ttl(uri, options.get("prefix"))
            if recorded is not None:
                options["ttl"] = recorded
        return open_store(uri, rule=rule, **options)
    except StoreError as e:
        raise CliError(redact(str(e))) from None
    except ValueError as e:  # an impossible rule or layout
        raise CliError(f"{redact(uri)}: {e}") from None
