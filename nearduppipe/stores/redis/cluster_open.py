"""Opening a Redis Cluster store: its URI, its shards' hash tags, its meta, reset.

The store's global keys share the tag ``{P}``: ``{P}:meta`` (format, ``cluster``, the number of
shards, rule and layout, the ticket counter ``order``, the decision counters) and ``{P}:d``
(the decisions, one list so ``max_decisions`` bounds them exactly). Shard ``s`` is a single-node
store's keys under its own tag ``T_s`` plus ``{T_s}:p`` (pending entries) and ``{T_s}:q`` (the
pending entry of a page key). ``T_s`` is ``P:s`` or ``P:s.n`` with the smallest ``n`` that puts
its slot in the ``s``-th of ``S`` equal slot ranges: the shards spread over the slot space
evenly, so with the usual even slot split the masters hold equal numbers of shards (12 shards,
3 masters: 4 each) whatever the prefix.
"""

from __future__ import annotations

import json
from typing import Any

from ...fingerprint.rule import Rule
from ...index.layout import Layout
from ..base import StoreError
from ..scope import check_scope
from . import keys as rk
from .log import new_epoch
from .loss import lost_at_open

__all__ = ["DEFAULT_SHARDS", "client_uri", "open_meta", "reset_keys", "shard_keys", "shard_tags"]

DEFAULT_SHARDS = 12
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
    return [*rk.store_keys(tag), rk.key(tag, "p"), rk.key(tag, "q")]


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
    left = [rk.key(tag, "*") for tag in dict.fromkeys(tags) if client.exists(*shard_keys(tag))]
    if left:
        raise lost_at_open(where, rk.key(prefix, "meta"), left)


def open_meta(
    client: Any,
    where: str,
    prefix: str,
    rule: Rule | None,
    blocks: int | None,
    shards: int | None,
    read_only: bool,
) -> tuple[Rule, Layout, int, bool]:
    """The store's rule, layout and shard count (created if new and writable), and whether the
    store exists. A contradicting rule is refused as by the single-node store."""
    key = rk.key(prefix, "meta")
    raw = client.hgetall(key)
    meta = {k.decode(): v.decode() for k, v in raw.items()}
    if meta and meta.get("cluster") != "1" and "format" in meta:
        raise StoreError(
            f"{where}: a single-node Redis store is at this prefix: open it with redis://"
        )
    if meta and "format" not in meta:
        raise lost_at_open(where, key, [])
    if not meta:
        _lost_shards(client, where, prefix, shards)
        rule = rule or Rule()
        layout = _layout(where, rule, blocks)
        n = DEFAULT_SHARDS if shards is None else shards
        if read_only:
            return rule, layout, n, False
        fields = {
            "format": "2",
            "cluster": "1",
            "shards": str(n),
            "rule": json.dumps(rule.as_dict()),
            "blocks": str(layout.n_blocks),
        }
        if blocks is None:
            fields["blocks_auto"] = "1"
        meta = _init(client, where, prefix, fields)
    stored = Rule(**json.loads(meta["rule"]))
    stored_blocks, n = int(meta["blocks"]), int(meta["shards"])
    check_scope(where, stored, rule)
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
    if rule is not None and rule != stored and not read_only:
        client.hset(key, "rule", json.dumps(rule.as_dict()))
    if not read_only:
        ready = meta.get("shards_ready") == "1"
        for tag in shard_tags(prefix, n):
            fields = {"format": "2", "shard_of": prefix, "epoch": new_epoch(), "new_total": "0"}
            _init(client, where, tag, fields, ready)
        if not ready:  # (a store from before this field gets it here)
            client.hset(key, "shards_ready", "1")
    return rule or stored, _layout(where, stored, rk.index_blocks(meta)), n, True


def _layout(where: str, rule: Rule, blocks: int | None) -> Layout:
    try:
        return Layout(distance=rule.radius, blocks=blocks)
    except ValueError as e:
        raise StoreError(f"{where}: {e}") from None


def reset_keys(client: Any, prefix: str) -> None:
    """Delete the store at ``prefix``: its global keys and every shard's (fixed names only)."""
    raw = client.hget(rk.key(prefix, "meta"), "shards")
    names = shard_keys(prefix)
    if raw is not None:
        for tag in shard_tags(prefix, int(raw)):
            names += shard_keys(tag)
    for name in names:  # one slot per call
        client.unlink(name)
