"""Opening a Redis Cluster store: its URI, its shards' hash tags, its meta, reset.

The store's global keys share the tag ``{P}``: ``{P}:meta`` (format 3, ``cluster``, the number
of shards, ``bucket_bits``, rule and layout, the ticket counter ``order``, the decision
counters), ``{P}:d`` (the decisions, one list so ``max_decisions`` bounds them exactly) and the
host-prefix and job tables ``{P}:u``/``v``/``j``/``w`` (:mod:`.names`; one id per host for the
whole store, so a record's key bytes name its key in every shard). Shard ``s`` is a format-3
single-node store's keys under its own tag ``T_s`` (its meta, log and ``2^bucket_bits``
buckets ``{T_s}:bXXXX``: every ``2^(16 - bucket_bits)``-th name, so the addresses keep the
single node's names; 12 shards: 4,096 buckets each, 49,152 in all, about the single node's
count: each bucket key costs ~100 bytes however few entries it holds) plus ``{T_s}:p`` (pending
entries), ``{T_s}:q`` (the pending entry of a page key) and ``{T_s}:m`` (kept markers; see
``redis_cluster.lua``). ``T_s`` is ``P:s`` or ``P:s.n`` with the smallest ``n`` that puts
its slot in the ``s``-th of ``S`` equal slot ranges: the shards spread over the slot space
evenly, so with the usual even slot split the masters hold equal numbers of shards (12 shards,
3 masters: 4 each) whatever the prefix.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, NamedTuple

from ...fingerprint.rule import Rule
from ...index.layout import Layout
from ..base import StoreError
from ..scope import recorded_rule, settle_rule
from ..ttl_rule import encode_ttl, settle_ttl
from . import buckets
from . import keys as rk
from .base import ALIASES_FORMAT, LISTPACK, migrate_first
from .format3 import listpack_advice, listpack_limits
from .log import new_epoch
from .loss import lost_at_open, new_identity

__all__ = [
    "DEFAULT_SHARDS",
    "Opened",
    "Recorded",
    "bucket_bits",
    "check_params",
    "client_uri",
    "open_meta",
    "reset_keys",
    "shard_keys",
    "shard_tags",
    "warn_listpack",
]

logger = logging.getLogger(__name__)

DEFAULT_SHARDS = 12
# A store whose rule keeps aliases: its shards' buckets hold alias records (redis_cluster.lua),
# which releases before Cluster aliases would read as entries: they refuse the format.
_ALIASES = str(ALIASES_FORMAT)
_SIZES = ("blocks", "shards", "bucket_bits")  # whole numbers of a Cluster store's meta
# A meta is created only where none of its keys is left (else the server lost part of the
# store: loss.py), and a shard's only until the store recorded all of them (``shards_ready``
# in ARGV[1]): after that a missing shard meta is a lost shard (a master restarted empty).
_INIT_LUA = """if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[1] == '1' or redis.call('EXISTS', unpack(KEYS, 2)) > 0 then return 0 end
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
end
return redis.call('HGETALL', KEYS[1])"""


def client_uri(uri: str) -> tuple[str, dict[str, str]]:
    """``redis+cluster://…`` -> the ``redis://…`` redis-py takes, and our query parameters."""
    base, ours = rk.split_uri(uri)
    scheme, sep, rest = base.partition("://")
    if not sep or scheme.lower() not in ("redis+cluster", "rediss+cluster"):
        raise StoreError(f"{rk.redact(uri, uri)}: a Redis Cluster URI is redis+cluster://host:port")
    return scheme.lower().split("+")[0] + "://" + rest, ours


def shard_tags(prefix: str, shards: int) -> list[str]:
    from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

    if "{" in prefix or "}" in prefix:
        raise StoreError(f"a Redis Cluster store's prefix has no braces: {prefix!r}")
    if not 1 <= shards <= 255:
        raise StoreError(f"shards must be from 1 to 255, not {shards!r}")
    tags = []
    for s in range(shards):
        for n in range(100_000):
            tag = f"{prefix}:{s}" + (f".{n}" if n else "")
            if key_slot(rk.key(tag, "meta").encode()) * shards // REDIS_CLUSTER_HASH_SLOTS == s:
                tags.append(tag)
                break
        else:  # pragma: no cover - CRC16 reaches every range within a few hundred tries
            raise StoreError(f"no hash tag for shard {s} of prefix {prefix!r}")
    return tags


def shard_keys(tag: str) -> list[str]:
    """The script's KEYS for a shard (or, with the store's prefix, for its global keys)."""
    return [*rk.store_keys3(tag), rk.key(tag, "p"), rk.key(tag, "q"), rk.key(tag, "m")]


def bucket_bits(shards: int) -> int:
    """Buckets per shard, as bits: the store's 2^16 split over the shards (rounded), so the
    bucket keys' overhead per entry stays the single node's whatever the shard count."""
    return 16 - round(math.log2(shards))


class Opened(NamedTuple):
    rule: Rule
    layout: Layout
    shards: int
    bits: int  # bucket bits per shard
    exists: bool
    identity: str | None  # the meta's id (None: read-only, a store from before ids)


class Recorded(NamedTuple):
    """What a writer records in the store's meta besides its layout (:mod:`..ttl_rule`,
    :mod:`.loss`): its TTL, whether it changes the recorded one on purpose, and the id a
    reset keeps (None: a new store gets its own)."""

    ttl: float | None
    change_ttl: bool = False
    carried: str | None = None


_READER = Recorded(None)  # (open_meta's default: what a read-only open records, nothing)


def _init(
    client: Any, where: str, tag: str, fields: dict[str, str], ready: bool = False
) -> dict[str, str]:
    """The meta of ``tag`` (the store's prefix, or a shard's tag), created with ``fields`` if
    it is new; a :class:`StoreError` if it was lost."""
    init = client.register_script(_INIT_LUA)
    keys = shard_keys(tag)
    flat = init(keys=keys, args=["1" if ready else "0", *(x for kv in fields.items() for x in kv)])
    if flat == 0:
        lost = "is missing although the store has all its shards (a master lost its keys)"
        raise lost_at_open(where, keys[0], [rk.key(tag, "*")], lost if ready else None)
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


def _lost_shards(client: Any, where: str, prefix: str, shards: int | None) -> None:
    """With no ``{P}:meta``: refuse if keys of the store's own or of its shards remain."""
    tags = [prefix]
    for n in {DEFAULT_SHARDS, shards or DEFAULT_SHARDS}:
        tags += shard_tags(prefix, n)
    names = {tag: [*shard_keys(tag), *rk.store_keys(tag)[1:]] for tag in dict.fromkeys(tags)}
    left = [rk.key(tag, "*") for tag, keys in names.items() if client.exists(*keys)]
    if left:
        raise lost_at_open(where, rk.key(prefix, "meta"), left)


def _read_meta(client: Any, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(key).items()}


def _new_or_raced(
    client: Any, where: str, prefix: str, shards: int | None, key: str
) -> dict[str, str]:
    """With no ``{P}:meta`` read: ``{}`` for a new store; the meta another writer created
    since that read (crawlers started together on a new prefix: the keys found are its);
    a :class:`StoreError` if keys of a lost store remain without one."""
    try:
        _lost_shards(client, where, prefix, shards)
    except StoreError:
        meta = _read_meta(client, key)
        if not meta:
            raise
        return meta
    return {}


def open_meta(
    client: Any,
    where: str,
    uri: str,
    prefix: str,
    rule: Rule | None,
    blocks: int | None,
    shards: int | None,
    read_only: bool,
    recorded: Recorded = _READER,
) -> Opened:
    """The store's rule, layout, shard count and bucket bits (created if new and writable),
    and whether the store exists. A contradicting rule is refused as by the single-node store;
    a format-2 store (an earlier release's) with the command that migrates it."""
    key = rk.key(prefix, "meta")
    meta = _read_meta(client, key)
    if not meta:
        meta = _new_or_raced(client, where, prefix, shards, key)
    if meta and meta.get("cluster") != "1" and "format" in meta:
        raise StoreError(
            f"{where}: a single-node Redis store is at this prefix: open it with redis://"
        )
    if meta and "format" not in meta:
        raise lost_at_open(where, key, [])
    if meta.get("format") == "2":
        raise migrate_first(where, uri, 2)
    if meta.get("format") == "3" and "migrating" in meta:
        raise StoreError(
            f"{where}: a migration from format 2 was interrupted; finish it: "
            f"nearduppipe migrate {uri}"
        )
    if meta and meta.get("format") not in ("3", _ALIASES):
        raise StoreError(
            f"{where}: format {meta.get('format')!r}: not a store this nearduppipe can read "
            f"(format 3, or {_ALIASES} with aliases; a newer one wrote it?)"
        )
    if not meta:
        rule = rule or Rule()
        layout = _layout(where, rule, blocks)
        n = DEFAULT_SHARDS if shards is None else shards
        if read_only:
            return Opened(rule, layout, n, bucket_bits(n), False, None)
        fields = {
            "format": _ALIASES if rule.aliases else "3",
            "cluster": "1",
            "shards": str(n),
            "bucket_bits": str(bucket_bits(n)),
            "rule": json.dumps(rule.as_dict()),
            "blocks": str(layout.n_blocks),
            "ttl": encode_ttl(recorded.ttl),
            "id": recorded.carried or new_identity(),
        }
        if blocks is None:
            fields["blocks_auto"] = "1"
        meta = _init(client, where, prefix, fields)
    stored = recorded_rule(where, meta["rule"])
    stored_blocks, n, bits = (rk.meta_int(meta, f, where, key) for f in _SIZES)
    rule = settle_rule(where, stored, rule)
    asked = rule or stored
    if (asked.radius, asked.wide_bits) != (stored.radius, stored.wide_bits) or (
        blocks is not None and blocks != stored_blocks
    ):
        raise StoreError(
            f"{where}: the store was built for radius {stored.radius} with {stored_blocks} "
            f"blocks ({stored.describe()}); the given rule asks for radius {asked.radius}. Open "
            "it with rule=None to use its rule, copy it to a new prefix, or reset it"
        )
    if shards is not None and shards != n:
        raise StoreError(f"{where}: the store has {n} shards, not {shards} (reset it to change)")
    identity = meta.get("id") if read_only else _settle(client, where, key, meta, recorded)
    if rule is not None and rule != stored and not read_only:
        fields = {"rule": json.dumps(rule.as_dict())}
        if rule.aliases and not stored.aliases:  # (releases without aliases refuse it)
            fields["format"] = _ALIASES
        client.hset(key, mapping=fields)
    if not read_only:
        ready = meta.get("shards_ready") == "1"
        for tag in shard_tags(prefix, n):
            fields = {
                "format": "3",
                "shard_of": prefix,
                "bucket_bits": str(bits),
                "epoch": new_epoch(),
                "new_total": "0",
                "live": "0",
            }
            _init(client, where, tag, fields, ready)
        if not ready:  # (a store from before this field gets it here)
            client.hset(key, "shards_ready", "1")
    layout = _layout(where, stored, rk.index_blocks(meta, where, key))
    return Opened(rule or stored, layout, n, bits, True, identity)


def _settle(client: Any, where: str, key: str, meta: dict[str, str], recorded: Recorded) -> str:
    """As the single-node store's ``_settle_meta``: a writer's TTL against the recorded one
    (before anything of the store is touched), and the store's identity, given to a store
    from before either field."""
    write = settle_ttl(where, meta.get("ttl"), recorded.ttl, recorded.change_ttl)
    if write is not None:
        client.hset(key, "ttl", write)
    if "id" in meta:
        return meta["id"]
    client.hsetnx(key, "id", new_identity())  # (another writer may adopt it first)
    return str(client.hget(key, "id").decode())


def _layout(where: str, rule: Rule, blocks: int | None) -> Layout:
    try:
        return Layout(distance=rule.radius, blocks=blocks)
    except ValueError as e:
        raise StoreError(f"{where}: {e}") from None


def reset_keys(client: Any, prefix: str) -> str | None:
    """Delete the store at ``prefix``: its global keys and every shard's (fixed names only,
    format 2's and 3's, and the shards' buckets). Returns the store's identity, which the
    store opened after the reset keeps (its clients follow a reset: :mod:`.loss`)."""
    meta = client.hmget(rk.key(prefix, "meta"), ["shards", "bucket_bits", "id"])
    names = [*shard_keys(prefix), *rk.store_keys(prefix)]
    tags = [] if meta[0] is None else shard_tags(prefix, int(meta[0]))
    for tag in tags:
        names += [*shard_keys(tag), *rk.store_keys(tag)]
    for name in dict.fromkeys(names):  # one slot per call
        client.unlink(name)
    if meta[1] is not None:
        for tag in tags:
            buckets.delete(client, tag, int(meta[1]))
    return None if meta[2] is None else str(meta[2].decode())


def warn_listpack(client: Any, where: str, entries: int) -> None:
    """Warn, per master, when it would keep the shards' bucket hashes as hash tables (~1.4x
    memory), as the single-node store does (``format3.listpack_advice``; ``entries``: what
    the fullest bucket needs, ``format3.bucket_entries``)."""
    import redis

    for node in client.get_primaries():
        try:
            limits = listpack_limits(client.get_redis_connection(node))
        except redis.RedisError:
            limits = None
        advice = listpack_advice(limits, LISTPACK[0], entries)
        if advice:
            logger.warning("%s: master %s:%s: %s", where, node.host, node.port, advice)


def check_params(where: str, params: dict[str, Any]) -> None:
    """redis-py's ``RedisCluster`` drops the node options it does not know without a word:
    refuse them here, as the single-node store's client does."""
    import inspect

    from redis import cluster

    nodes = set(getattr(cluster, "REDIS_ALLOWED_KEYS", ()))
    nodes -= set(getattr(cluster, "KWARGS_DISABLED_KEYS", ()))
    known = nodes | set(inspect.signature(cluster.RedisCluster.__init__).parameters)
    unknown = sorted(set(params) - known)
    if unknown:
        raise StoreError(
            f"{where}: NEARDUP_REDIS_PARAMS (params=) holds options redis-py's RedisCluster "
            f"does not take: {unknown}"
        )
