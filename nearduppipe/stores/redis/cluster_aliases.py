"""The Redis Cluster store's aliases across shards (docs/operations.md, "Redis Cluster",
"Aliases"): an alias lives in its own key's shard, and its root (address 8, sequence slot 6,
shard 2: 16 bytes) names its kept page in any shard, which no script of the alias's shard can
read. So the client reads kept pages: those of the aliases a look found (:meth:`_kept_pages`),
the root of a page kept while a check waited for it (:meth:`_waited_root`), every alias's for
a listing (:meth:`_list_aliases`) and for ``prune`` (:meth:`_prune_dead`).

Why apart: the check protocol (:mod:`.cluster_check`, whose :class:`ClusterBase` is built on
this class) and the store's interface (:mod:`.cluster`) each call one piece; the reads across
shards are one concern.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from ...fingerprint.rule import Fingerprints, distances
from ..base import Alias, Match, Store
from . import buckets
from . import keys as rk
from .loss import fresh_ids
from .names import Names
from .shard import ClusterShard, send_many

__all__ = ["ClusterAliases", "KeptPage", "Rank"]

_BATCH = 500
Rank = tuple[int, int, int]  # an alias's own order: its wide distance, distance and ticket
KeptPage = tuple[int, bytes, Match, int, Rank]  # shard, root, match, ticket, its alias's rank


def root_shard(root: bytes) -> int:
    return int.from_bytes(root[14:16], "big")


class ClusterAliases(Store):
    """The reads across shards that aliases need; the state and plumbing are
    :class:`~.cluster_check.ClusterBase`'s."""

    shards: int
    bits: int
    clock: Callable[[], float] | None
    _client: Any
    _shards: list[ClusterShard]
    _names: Names

    @abstractmethod
    def _head(
        self, mode: str, now: float | str, pos: int = 0, epoch: str | bytes = ""
    ) -> list[Any]: ...

    @abstractmethod
    def _errors(self, what: str, write: bool = False) -> AbstractContextManager[None]: ...

    @abstractmethod
    def _where(self) -> str: ...

    @abstractmethod
    def _call(self, what: str, shard: int, args: list[Any], write: bool = True) -> Any: ...

    @abstractmethod
    def _refresh_names(self) -> None:
        """Drop the cached host and job ids (:class:`~.cluster.RedisClusterStore`)."""

    def _read_roots(self, roots: Sequence[bytes], now: float | str, what: str) -> list[bytes]:
        """Per root, its kept page's record if that page is still the entry the root names
        (no alias, within the TTL), else ``b""``: one ``roots`` call per shard, sent at once."""
        out = [b""] * len(roots)
        by_shard: dict[int, list[int]] = {}
        for i, root in enumerate(roots):
            if root_shard(root) < self.shards:  # (else no shard of this store's)
                by_shard.setdefault(root_shard(root), []).append(i)
        calls = [
            (self._shards[s], [*self._head("roots", now), *(roots[i][:14] for i in idx)])
            for s, idx in by_shard.items()
        ]
        with self._errors(what):
            replies = send_many(calls)
        for idx, reply in zip(by_shard.values(), replies, strict=True):
            if isinstance(reply, Exception):
                with self._errors(what):
                    raise reply
            for i, raw in zip(idx, reply, strict=True):
                out[i] = bytes(raw)
        return out

    def _kept_pages(
        self,
        aliases: list[tuple[Rank, bytes]],
        fps: Fingerprints,
        now: float | str,
        skip: str | None,
    ) -> list[KeptPage]:
        """The kept pages the ``aliases`` (rank and root of each) stand for: each still the
        entry it was when its alias was made, not the query's own key ``skip``, and within the
        rule's alias bound of the query, ranked as its alias (as the single node's search
        does)."""
        bound = self.rule.alias_threshold
        if not aliases or bound is None:
            return []
        out = []
        kept = self._read_roots([root for _, root in aliases], now, "search")
        for (rank, root), raw in zip(aliases, kept, strict=True):
            if not raw:
                continue  # (the kept page removed, replaced, or past the TTL)
            with self._errors("search"):
                entry = self._names.entry(raw)
            d, dw = distances(entry.fingerprints, fps)
            if entry.key != skip and dw is not None and dw <= bound:
                m = Match(entry.key, entry.fingerprint, d, dw)
                out.append((root_shard(root), root, m, int.from_bytes(raw[17:23], "big"), rank))
        return out

    def _waited_root(self, shard: int, key: str, ticket: int, now: float | str) -> bytes:
        """The root of page ``key``, kept in ``shard`` while a check waited for it (the look
        gave its pending id, not its address): read by key, and taken only if it holds
        ``ticket`` (0: unknown, when it took one and was kept between two polls: the key's
        entry then, a moment after); ``b""``: no alias."""
        target = self._shards[shard]

        def attempt() -> Any:
            head = target.head("refs", now, 0, target.epoch)  # (before the ids)
            address = self._names.address(key, assign=False)
            return [b""] if address is None else target.send([*head, address])

        errors = partial(self._errors, "check", write=True)
        (ref,) = fresh_ids(attempt, self._refresh_names, errors, f"{self._where()}: check")
        if not ref or ticket not in (0, int.from_bytes(ref[8:14], "big")):
            return b""
        return bytes(ref) + shard.to_bytes(2, "big")

    def _list_aliases(self) -> list[Alias]:
        """Every shard's aliases whose kept page (in any shard) is the entry they stand for:
        only the aliases and their kept pages are read."""

        def where(root: bytes) -> tuple[int, bytes]:
            return root_shard(root), root[:8]

        def read() -> list[tuple[tuple[int, bytes], bytes]]:
            rows: list[tuple[tuple[int, bytes], bytes]] = []
            client = self._client
            for s, shard in enumerate(self._shards):
                n = int(client.hget(shard.key("meta"), "aliases") or 0)
                found = buckets.records(client, shard.tag, n, self.bits, aliases_only=True)
                rows += [((s, a), raw) for a, raw in found]
            roots: dict[int, set[bytes]] = {}
            for _, raw in rows:
                rs, address = where(raw[-16:])
                if rs < self.shards:
                    roots.setdefault(rs, set()).add(address)
            for rs, addresses in roots.items():
                kept = buckets.read_at(client, self._shards[rs].tag, addresses)
                rows += [((rs, a), raw) for a, raw in kept]
            return rows

        now = rk.call_time(self.clock, stamp=False)
        with self._errors("scan"):
            cutoff = rk.ttl_cutoff(self._client, now, self.ttl)
            decode = partial(self._names.aliases, cutoff=cutoff, root_at=where)
            return self._names.stable(read, decode, self._refresh_names, self._where())

    def _prune_dead(self, aliases: list[tuple[int, bytes, bytes]], now: float | str) -> int:
        """Delete the ``aliases`` (shard, address, root) whose kept page is no longer the
        entry they stand for, each only if it still holds that root when its shard's script
        runs."""
        removed = 0
        for i in range(0, len(aliases), _BATCH):
            part = aliases[i : i + _BATCH]
            kept = self._read_roots([root for _, _, root in part], now, "prune")
            dead = [a for a, raw in zip(part, kept, strict=True) if not raw]
            for s in {a[0] for a in dead}:
                args = [x for a in dead if a[0] == s for x in a[1:]]
                removed += int(self._call("prune", s, [*self._head("unalias", now), *args]))
        return removed
