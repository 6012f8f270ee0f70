"""Opening a Redis store (the layout kept in ``{P}:meta``, format-1 stores, reset, errors) and
building its script calls.

A base class of :class:`~nearduppipe.stores.redis.RedisStore`, apart so each module stays short.
The rule and layout are read from the store, never assumed: a store built for one radius holds
tables that cannot answer another radius exactly, so a contradicting rule is refused with what
to do, while ``similarity`` and ``legacy_distance`` (thresholds, not layout) may change.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, cast

from ...fingerprint.rule import Fingerprints, Rule
from ...index.layout import Layout
from ..base import Store, StoreError, StoreUnavailable
from ..memory import MemoryStore
from ..scope import format1_rule, recorded_rule, settle_rule
from ..ttl_rule import encode_ttl, settle_ttl
from . import buckets
from . import keys as rk
from .format1 import format1_keys, read_format1, switch_format1
from .format3 import bucket_entries, listpack_advice, listpack_limits
from .log import LogIndex, compact, new_epoch
from .loss import gone, lost_at_open, new_identity, recreated
from .names import Names
from .shard import Guard, Limits, NodeShard
from .wire import Packed, _bytes, bulk

FORMAT_VERSION = 3
# A store whose rule keeps aliases (format3.py): earlier releases must refuse it (their
# scripts would take an alias for an entry of the dropped page's key).
ALIASES_FORMAT = 4
logger = logging.getLogger(__name__)
# Server limits under which a bucket hash stays a listpack (format3.listpack_advice): records
# of URLs up to ~180 characters; 512 records per bucket to ~25 M entries (bucket_entries).
LISTPACK = (256, 512)
# (a store's other keys without its meta are a lost store, never one to create: loss.py)
_INIT_LUA = """if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', unpack(KEYS, 2)) > 0 then return 0 end
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return redis.call('HGETALL', KEYS[1])"""
_COUNT_ENTRIES_LUA = """if redis.call('HEXISTS', KEYS[1], 'new_total') == 0 then
  redis.call('HSET', KEYS[1], 'new_total', redis.call('HGET', KEYS[1], 'live') or 0)
end"""


def migrate_first(where: str, uri: str, fmt: int) -> StoreError:
    """The refusal of a store this version does not write until it is migrated."""
    return StoreError(
        f"{where}: a format-{fmt} store (an earlier nearduppipe wrote it); this version "
        f"reads and writes format {FORMAT_VERSION}: migrate it first: nearduppipe migrate {uri}"
    )


class RedisBase(Store):
    """State and opening logic shared by the Redis store (see ``redis.py`` for the keys)."""

    format_version = FORMAT_VERSION
    prefix: str
    layout: Layout
    clock: Callable[[], float] | None  # None: the server's TIME (keys.call_time)
    _client: Any
    _redis: Any
    _guard: Guard  # closed, read-only, lost; the store's id; Redis errors -> the store's
    _shard: NodeShard  # the client, keys and program; its epoch: the cached ids' (shard.py)
    _f1: MemoryStore | None
    _log: LogIndex
    _instance: str
    _reply_fields: set[str]
    _fixed_args: dict[tuple[int, bool], bytes]
    _names: Names
    _absent: bool  # opened read-only where no store was: nothing to find, nothing lost
    _change_ttl: bool  # a writer that changes the store's recorded TTL on purpose (ttl_rule)
    _carried: str | None  # the id a reset keeps, so that the store's clients follow it

    # -- script arguments --------------------------------------------------------------------
    def _head_args(self, mode: str, now: float | str, epoch: str = "") -> list[Any]:
        """ARGV[1] to ARGV[11] of a call that keeps no reply and sends no log position (a
        search call packs its own: :meth:`_fixed`, :meth:`_search_call`)."""
        return self._shard.head(mode, now, 0, epoch)

    def _record(
        self, fps: Fingerprints, key: str, t: float, job: str | None, text: str | None
    ) -> bytes:
        return self._names.record(fps, key, t, job, text)

    def _fixed(self, reply: bool) -> bytes:
        """ARGV[3] to ARGV[8] of this thread's search calls (the rule, the limits and the
        field of its replies, or none), packed once per thread: the same on every call."""
        ident = threading.get_ident()
        fixed = self._fixed_args.get((ident, reply))
        if fixed is None:
            field = f"{self._instance}:{ident}" if reply else ""
            if reply:
                self._reply_fields.add(field)
            rule = rk.rule_args(self.rule, self.ttl, self.max_decisions)
            fixed = self._fixed_args[ident, reply] = bulk(map(_bytes, [*rule, field]))
        return fixed

    def _search_call(
        self,
        what: str,
        fp: int,
        args: list[Any],
        token: bytes = b"",
        encode: Callable[[], list[Any]] | None = None,
    ) -> Any:
        """A check or near call with the candidates of this client's index, which first
        catches up with the log when the script says it is too far behind or stale (a
        compaction or reset). Returns the script's result; the index takes the members the
        reply carries. (The hot path: packed here, errors mapped without a context manager.)"""
        write = what == "check"
        guard, wire = self._guard, self._shard.wire
        guard.usable(write)
        if not self._log.loaded:  # on the first search: copy, info and get never need it
            with self._errors("load"):
                self._log.load(self._client, self._k("meta"), self._k("n"))
                self._same_store()
                # (a reset since an add or get read the ids: encoded again)
                if (self._log.epoch or "-") != self._shard.epoch and self._adopt(self._log.epoch):
                    args = encode() if encode is not None else args
        now = args[0]
        t = now.encode() if isinstance(now, str) else repr(float(now)).encode()
        head = bulk((what.encode(), t)) + self._fixed(bool(token))
        rest = [_bytes(a) for a in args[1:]]
        for _ in range(8):
            pos, epoch, cand, last = self._log.candidates(fp, self.rule.radius)
            tag = epoch.encode() + b"/" + last if last else epoch.encode()
            body = head + bulk((token, b"%d" % pos, tag, *rest, cand))
            try:
                reply = wire.call(Packed(len(rest) + 12, body), write=write)
            except self._redis.RedisError as e:
                raise guard.failure(what, e) from None
            status, start, members = reply
            if status == b"G":
                if self._absent:
                    return b""  # (a near call: no matches)
                raise guard.lose(gone(self._where(), self._k("meta"), self._client))
            if status == b"E":
                with self._errors("load"):
                    self._log.load(self._client, self._k("meta"), self._k("n"))
                    self._same_store()  # (a reset keeps the store's id; a new store has its own)
                    if self._adopt(self._log.epoch) and encode is not None:  # (a reset)
                        rest = [_bytes(a) for a in encode()[1:]]
                continue
            if status == b"R":
                with self._errors("load"):
                    self._log.catch_up(self._client, self._k("meta"), self._k("n"))
                    if self._log.epoch != epoch:  # (reloaded: a new epoch meanwhile)
                        self._same_store()
                continue
            self._log.apply(int(start), members, epoch)
            return status
        raise StoreUnavailable(f"{self._where()}: {what}: the log kept changing under this client")

    def _adopt(self, epoch: str) -> bool:
        """Take the epoch of a log just read as the cached ids' own: they are kept when each
        still names the same host and job (a compaction), else dropped first (a reset: then
        True, and what was encoded with them is encoded again)."""
        stale = not self._names.current()
        if stale:
            self._names.forget()
        self._shard.epoch = epoch or "-"
        return stale

    def _run(self, what: str, args: list[Any], write: bool = True) -> Any:
        return self._shard.call(what, args, write)

    def _errors(self, what: str, write: bool = False) -> AbstractContextManager[None]:
        """Closed or read-only -> StoreError; Redis errors as :meth:`.shard.Guard.failure`."""
        return self._guard.errors(what, write)

    # -- opening -----------------------------------------------------------------------------
    def _k(self, name: str) -> str:
        return rk.key(self.prefix, name)

    def _where(self) -> str:
        return self._guard.where

    def _set_layout(self, rule: Rule, blocks: int | None) -> None:
        try:
            self.layout = Layout(distance=rule.radius, blocks=blocks)
        except ValueError as e:
            raise StoreError(f"{self._where()}: {e}") from None
        self.rule = rule
        self._shard.limits = Limits(rule, self.ttl, self.max_decisions)
        self._log = LogIndex(self.layout)
        self._names = Names(self._client, self.prefix)
        self._shard.epoch = "-"  # (never an epoch: the first call that sends it reads the meta's)

    def _meta_int(self, meta: dict[str, str], field: str, default: int | None = None) -> int:
        """A whole number of the meta; a damaged one names the field (:func:`.keys.meta_int`)."""
        return rk.meta_int(meta, field, self._where(), self._k("meta"), default)

    def _meta(self) -> dict[str, str]:
        raw = cast(dict[bytes, bytes], self._client.hgetall(self._k("meta")))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def _lost_keys(self, meta: dict[str, str]) -> dict[str, str]:
        """Refuse a store the server lost part of: other keys without a meta, or a meta
        without a format (counters re-created by an older client's writes after a loss).
        Returns the meta to open: the one read, or one another writer created since an empty
        read (crawlers started together on a new prefix: the keys found are its)."""
        if not meta:
            others = sorted({*rk.store_keys(self.prefix)[1:], *rk.store_keys3(self.prefix)[1:]})
            flags = self._client.pipeline(transaction=False)
            for name in others:
                flags.exists(name)
            left = [name for name, n in zip(others, flags.execute(), strict=True) if n]
            left += buckets.existing(self._client, self.prefix)
            if left:
                meta = self._meta()
                if not meta:
                    raise lost_at_open(self._where(), self._k("meta"), left)
        if meta and "format" not in meta:
            raise lost_at_open(self._where(), self._k("meta"), [])
        return meta

    def _open_meta(self, rule: Rule | None, blocks: int | None) -> None:
        meta = self._lost_keys(self._meta())
        if meta.get("cluster") == "1" or "shard_of" in meta:
            raise StoreError(
                f"{self._where()}: a Redis Cluster store (or one of its shards): open it with "
                "redis+cluster://"
            )
        fmt = self._meta_int(meta, "format", 0)
        if fmt == 2:
            raise migrate_first(self._where(), self.uri, 2)
        if fmt == 3 and "migrating" in meta:
            raise StoreError(
                f"{self._where()}: a migration from format 2 was interrupted; finish it: "
                f"nearduppipe migrate {self.uri}"
            )
        if meta and fmt not in (1, 3, ALIASES_FORMAT):
            raise StoreError(
                f"{self._where()}: format {meta.get('format')!r}: not a store this nearduppipe "
                f"can read (format {FORMAT_VERSION}; a newer one wrote it?)"
            )
        if fmt == 1:
            self._open_format1(rule, blocks)
            return
        if not meta:
            self._set_layout(rule or Rule(), blocks)
            if self.read_only:  # an empty store that writes nothing
                self._absent = True
                return
            fields = {
                "format": str(ALIASES_FORMAT if self.rule.aliases else FORMAT_VERSION),
                "rule": json.dumps(self.rule.as_dict()),
                "blocks": str(self.layout.n_blocks),
                "epoch": new_epoch(),
                "new_total": "0",
                "live": "0",
                "ttl": encode_ttl(self.ttl),
                "id": self._carried or new_identity(),
            }
            if blocks is None:
                fields["blocks_auto"] = "1"
            init = self._client.register_script(_INIT_LUA)
            keys = rk.store_keys3(self.prefix)
            flat = init(keys=keys, args=[x for kv in fields.items() for x in kv])
            if flat == 0:  # (its other keys appeared meanwhile: a loss, or another writer's)
                meta = self._lost_keys({})
                if not meta:
                    raise StoreError(f"{self._where()}: its keys changed while it was created")
            else:
                meta = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        if "epoch" not in meta:
            raise StoreError(
                f"{self._where()}: a store without a log (written by an unreleased "
                "development version); reset it"
            )
        stored = recorded_rule(self._where(), meta["rule"])
        stored_blocks = self._meta_int(meta, "blocks")
        rule = settle_rule(self._where(), stored, rule)
        asked = rule or stored
        if (asked.radius, asked.wide_bits) != (stored.radius, stored.wide_bits) or (
            blocks is not None and blocks != stored_blocks
        ):
            raise StoreError(
                f"{self._where()}: the store was built for radius {stored.radius} with "
                f"{stored_blocks} blocks ({stored.describe()}); the given rule asks for radius "
                f"{asked.radius}{f' with {blocks} blocks' if blocks is not None else ''}. Open "
                "it with rule=None to use its rule, copy it to a new prefix with that rule "
                "(nearduppipe copy), or reset it"
            )
        self._set_layout(rule or stored, rk.index_blocks(meta, self._where(), self._k("meta")))
        self._settle_meta(meta)  # (before a writer's TTL touches the keys: persist, sweeps)
        if rule is not None and rule != stored and not self.read_only:
            # similarity and legacy_distance are thresholds, not layout: the new default
            fields = {"rule": json.dumps(rule.as_dict())}
            if rule.aliases and not stored.aliases:
                fields["format"] = str(ALIASES_FORMAT)
            self._client.hset(self._k("meta"), mapping=fields)
        self.format_version = ALIASES_FORMAT if self.rule.aliases else FORMAT_VERSION
        live = self._meta_int(meta, "live", 0)
        if not (self.ttl or self.read_only) and buckets.expiring(self._client, self._k("n"), live):
            self._client.persist(self._k("n"))  # undo the expiry of an earlier TTL run
            buckets.persist(self._client, self.prefix, aliases=self.rule.aliases)  # (and count)
        if not self.read_only:
            if "new_total" not in meta:  # a store from before it was counted: its entries
                self._client.eval(_COUNT_ENTRIES_LUA, 1, self._k("meta"))
            self._compact_if_needed(meta)
            # (memory: the writers' business; a bucket holds aliases as records too)
            self._check_listpack(live + self._meta_int(meta, "aliases", 0))
        self._shard.epoch = meta["epoch"]  # (no id was read yet: the names cache is empty)

    def _settle_meta(self, meta: dict[str, str]) -> None:
        """A writer's TTL against the store's recorded one (:mod:`..ttl_rule`), and the
        store's identity, which the client keeps to know the store again after an epoch
        change (:meth:`_same_store`); a store from before either field gets it here."""
        self._guard.identity = meta.get("id")
        if self.read_only:
            return
        write = settle_ttl(self._where(), meta.get("ttl"), self.ttl, self._change_ttl)
        if write is not None:
            self._client.hset(self._k("meta"), "ttl", write)
        if self._guard.identity is None:  # (another writer may adopt it first: theirs is kept)
            self._client.hsetnx(self._k("meta"), "id", new_identity())
            self._guard.identity = cast(bytes, self._client.hget(self._k("meta"), "id")).decode()

    def _same_store(self) -> None:
        """After the log's epoch changed: refuse a store created anew under the prefix (the
        old one was lost, and another client made this one) rather than follow it as a
        reset, which keeps the id; once refused, every later call fails too."""
        had = self._guard.identity
        if had is None:
            return  # (opened read-only before the store had an id: nothing to compare)
        raw = self._client.hget(self._k("meta"), "id")
        found = None if raw is None else raw.decode()
        if found != had:
            raise self._guard.lose(recreated(self._where(), had, found))

    def _check_listpack(self, records: int) -> None:
        """Warn when the server would keep the bucket hashes as hash tables (~1.4x memory)."""
        try:
            limits = listpack_limits(self._client)
        except self._redis.RedisError:
            limits = None
        # (room to double before the next open: an outgrown bucket stays a hash table)
        advice = listpack_advice(limits, LISTPACK[0], bucket_entries(2 * records, buckets.BUCKETS))
        if advice:
            logger.warning("%s: %s", self._where(), advice)

    def _compact_if_needed(self, meta: dict[str, str]) -> None:
        """Compact the log once the members of removed records outnumber the live ones
        (entries and aliases: both are logged)."""
        dead = self._meta_int(meta, "dead", 0)
        if dead > max(10_000, self._meta_int(meta, "live", 0) + self._meta_int(meta, "aliases", 0)):
            compact(self._shard)

    def _open_format1(self, rule: Rule | None, blocks: int | None) -> None:
        entries = read_format1(self._client, self.prefix)
        self._set_layout(format1_rule(rule), blocks)  # (no aliases unless asked; version 1)
        if self.read_only:
            self.format_version = 1
            self._f1 = MemoryStore(
                self.uri, self.rule, ttl=self.ttl, max_decisions=None, clock=self.clock or time.time
            )
            self._f1.import_records(entries, [])
            return
        # migrate in place: the entries, then the meta's switch (a crash at any point leaves
        # a readable store: format1.switch_format1)
        self.import_records(entries, [])
        self.format_version = ALIASES_FORMAT if self.rule.aliases else FORMAT_VERSION
        self._shard.epoch = switch_format1(
            self._client, self.prefix, self.rule, self.layout, self.format_version
        )
        self._settle_meta(self._meta())

    def _reset(self, blocks: int | None, rule: Rule | None) -> None:
        meta = self._meta()
        self._carried = meta.get("id")  # (none when the store was lost: a new one gets its own)
        doomed: set[str | bytes] = {*rk.store_keys(self.prefix, 0), *rk.store_keys3(self.prefix)}
        try:
            counts = [Layout(distance=(rule or Rule()).radius, blocks=blocks).tables()]
        except ValueError as e:
            raise StoreError(f"{self._where()}: {e}") from None
        if meta.get("format") == "2":
            stored = recorded_rule(self._where(), meta["rule"])
            blocks2 = self._meta_int(meta, "blocks")
            counts.append(Layout(distance=stored.radius, blocks=blocks2).tables())
        for tables in counts:
            doomed.update(rk.store_keys(self.prefix, len(tables)))
        if meta.get("format") == "1":
            doomed.update(format1_keys(self._client, self.prefix))
        names = sorted(doomed, key=lambda k: k if isinstance(k, bytes) else k.encode())
        for i in range(0, len(names), 1000):
            self._client.unlink(*names[i : i + 1000])
        buckets.delete(self._client, self.prefix)
