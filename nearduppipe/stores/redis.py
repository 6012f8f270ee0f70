"""``redis://host:port/db``, ``rediss://…``, ``unix:///path/redis.sock?db=0``: one store shared by
many crawler processes and machines (store format 2).

Every operation that writes is one ``EVALSHA`` of ``redis_check_and_add.lua``, so a check (own
entry, candidate search, verdict, insert or decision) is atomic and costs one round trip.

Keys (``P`` is the prefix, default ``neardup:<name>``; in braces, so all keys share a Redis
Cluster slot; the names are fixed, so resetting a store never needs a pattern):

* ``{P}:meta`` hash: ``format`` (2), ``rule`` (JSON of :meth:`Rule.as_dict`), ``blocks``, the
  counters, the entry sequence and the TTL sweep cursor. The layout lives here: opening a store
  with a rule of another radius is an error, ``rule=None`` takes the stored one.
* ``{P}:k`` hash: page key -> entry id (8 bytes); ``{P}:e`` hash: entry id -> record
  (:mod:`._redis_codec`); one entry per key.
* ``{P}:t<T>`` hash per block table: 4-byte table key -> bucket, members of 16 bytes (the
  fingerprint and the entry id) end to end.
* ``{P}:d`` list of decisions, trimmed to ``max_decisions`` in the same script call.
* ``{P}:r`` hash: the last reply per client thread, so a retried call is not applied twice.

**Layout.** Multi-index hashing over 3 blocks (keys of 21-22 bits) probed at radius 2: a check
reads 232 buckets per table in one ``HMGET`` per table, each bucket holding ~n / 2**21 members.
Measured (``benchmarks/redis_bench.py``, docs/operations.md) against Manku-style tables that are
looked up exactly (10 blocks: 45 tables of 12-13-bit keys), which scan ~20x more members per
check in Lua and hold 15x more members.

**TTL.** Entries older than ``ttl`` never match and an expired own entry counts as none. Each
write looks at 16 records (a cursor over ``{P}:e``) and deletes those older than ``2 * ttl``;
:meth:`prune` deletes all older than ``ttl``; the data keys expire ``2 * ttl`` after the last
write.
"""

from __future__ import annotations

import importlib.resources
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import numpy as np

from ..index import table_key
from ..rule import Fingerprints, Rule
from . import _redis_keys as rk
from ._redis_codec import (
    decision_head,
    decode_decision,
    decode_entry,
    decode_match,
    encode_decision,
    encode_entry,
    encode_job,
    entry_head,
)
from ._redis_open import RedisBase
from .base import (
    DEFAULT_MAX_DECISIONS,
    Decision,
    Entry,
    Match,
    StoreError,
    StoreUnavailable,
    Verdict,
    check_fingerprints,
    check_key,
    check_max_decisions,
    check_ttl,
    clean_text,
    register_store,
)
from .memory import MemoryStore

__all__ = ["RedisStore", "StoreUnavailable"]

_LUA = (importlib.resources.files(__package__) / "redis_check_and_add.lua").read_text("utf-8")
_BATCH = 500


class RedisStore(RedisBase):
    def __init__(
        self,
        uri: str,
        rule: Rule | None = None,
        *,
        prefix: str | None = None,
        name: str | None = None,
        reset: bool = False,
        ttl: float | None = None,
        max_decisions: int | None = DEFAULT_MAX_DECISIONS,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        blocks: int | None = None,
        timeout: float = 5.0,
        params: dict[str, Any] | None = None,
    ) -> None:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        self._redis = redis
        client_uri, ours = rk.split_uri(uri)
        self._raw_uri = uri
        self.uri = rk.redact(uri, uri)
        self.prefix = ours.get("prefix") or prefix or f"neardup:{name or 'default'}"
        self.ttl = check_ttl(float(ours["ttl"]) if ours.get("ttl") else ttl, self.uri)
        self.max_decisions = check_max_decisions(max_decisions, self.uri)
        self.read_only = bool(read_only)
        self.clock = clock
        self._closed = False
        self._f1: MemoryStore | None = None  # a format-1 store opened read-only
        self._instance = os.urandom(8).hex()
        self._reply_fields: set[str] = set()
        if reset and self.read_only:
            raise StoreError(f"{self.uri}: reset=True and read_only=True contradict each other")
        try:
            self._client = redis.Redis.from_url(
                client_uri,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                health_check_interval=30,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
                retry_on_error=[redis.ConnectionError, redis.TimeoutError],
                **(params or {}),
            )
        except (ValueError, TypeError) as e:
            raise StoreError(f"{self.uri}: {rk.redact(str(e), uri)}") from e
        self._script = self._client.register_script(_LUA)
        with self._errors("open"):
            if reset:
                self._reset(blocks, rule)
            self._open_meta(rule, blocks)

    def _head_args(self, mode: str, now: float, token: bytes = b"") -> list[Any]:
        w = self.rule.wide_threshold
        field = ""
        if token:
            field = f"{self._instance}:{threading.get_ident()}"
            self._reply_fields.add(field)
        return [
            mode,
            repr(now),
            "" if self.ttl is None else repr(self.ttl),
            "" if self.max_decisions is None else self.max_decisions,
            self.rule.radius,
            -1 if w is None else w,
            min(self.rule.radius, self.rule.legacy_distance),
            field,
            token,
            len(self._tables),
        ]

    def _probes(self, fp: int) -> list[bytes]:
        """Per table, the 4-byte keys of every bucket to read (the query's own first)."""
        return [
            (np.uint32(table_key(fp, parts)) ^ masks).astype(">u4").tobytes()
            for parts, masks in zip(self._tables, self._probe_masks, strict=True)
        ]

    def _snapshot(self, fp: int, probes: list[bytes]) -> tuple[str, bytes]:
        """Read every probed bucket (one read-only call) and scan it here, vectorised: the
        sequence number it was read at and the ids within the radius. The check script adds
        what was stored since, so the server never scans buckets member by member in Lua."""
        raw: bytes = self._run("probe", [*self._head_args("probe", 0.0), *probes], write=False)
        members = np.frombuffer(raw, dtype=">u8", offset=8).reshape(-1, 2)
        near = np.bitwise_count(members[:, 0] ^ np.uint64(fp)) <= self.rule.radius
        return str(int.from_bytes(raw[:8], "big")), np.unique(members[near, 1]).astype(
            ">u8"
        ).tobytes()

    def _fields(self, fp: int) -> bytes:
        return b"".join(struct.pack(">I", table_key(fp, parts)) for parts in self._tables)

    def _record(
        self, fps: Fingerprints, key: str, t: float, job: str | None, text: str | None
    ) -> bytes:
        return encode_entry(fps.fp, fps.wide, t, self._fields(fps.fp), job, key, text)

    def _run(self, what: str, args: list[Any], write: bool = True) -> Any:
        with self._errors(what, write=write):
            return self._script(keys=self._keys, args=args)

    def __enter__(self) -> RedisStore:
        return self

    # -- the interface -----------------------------------------------------------------------
    def check(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
    ) -> Verdict:
        fps = check_fingerprints(fps)
        check_key(key)
        text = clean_text(text)
        if self._f1 is not None or self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        now = float(self.clock())
        args = [
            *self._head_args("check", now, os.urandom(8)),
            key,
            "0" if job is None else "1",
            encode_job(job),
            self._record(fps, key, now, job, text),
            decision_head(fps.fp, now, key, text),
            *self._snapshot(fps.fp, probes := self._probes(fps.fp)),
            *probes,
        ]
        reply: bytes = self._run("check", args)
        status = {
            b"N": "new",
            b"C": "changed",
            b"A": "again",
            b"U": "unchanged",
            b"D": "duplicate",
        }[reply[:1]]
        if len(reply) > 1:
            return Verdict(status, decode_match(reply, 1)[0])  # type: ignore[arg-type]
        return Verdict(status)  # type: ignore[arg-type]

    def near(self, fps: Fingerprints | int, *, exclude: str | None = None) -> list[Match]:
        fps = check_fingerprints(fps)
        if exclude is not None:
            check_key(exclude)
        if self._f1 is not None:
            return self._f1.near(fps, exclude=exclude)
        now = float(self.clock())
        probes = self._probes(fps.fp)
        args = [
            *self._head_args("near", now),
            exclude or "",
            self._record(fps, "", now, None, None),
            *self._snapshot(fps.fp, probes),
            *probes,
        ]
        reply: bytes = self._run("near", args, write=False)
        out, pos = [], 0
        while pos < len(reply):
            m, pos = decode_match(reply, pos)
            out.append(m)
        return out

    def add(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
        stored_at: float | None = None,
    ) -> None:
        fps = check_fingerprints(fps)
        check_key(key)
        now = float(self.clock())
        t = now if stored_at is None else float(stored_at)
        args = [*self._head_args("add", now), key, self._record(fps, key, t, job, clean_text(text))]
        self._run("add", args)

    def get(self, key: str) -> Entry | None:
        check_key(key)
        if self._f1 is not None:
            return self._f1.get(key)
        raw = self._run("get", [*self._head_args("get", 0.0), key], write=False)
        return decode_entry(raw) if raw else None

    def remove(self, key: str) -> bool:
        check_key(key)
        return bool(self._run("remove", [*self._head_args("remove", 0.0), key]))

    def __len__(self) -> int:
        if self._f1 is not None and not self._closed:
            return len(self._f1)
        with self._errors("count"):
            return int(self._client.hlen(self._k("k")))

    def entries(self) -> Iterator[Entry]:
        if self._f1 is not None:
            yield from self._f1.entries()
            return
        rows = []
        with self._errors("scan"):
            for eid, raw in self._client.hscan_iter(self._k("e"), count=1000):
                rows.append((int.from_bytes(eid, "big"), raw))
        rows.sort(key=lambda r: r[0])  # ids count up: the order stored (base.Store.entries)
        for _, raw in rows:
            yield decode_entry(raw)

    def decisions(self) -> Iterator[Decision]:
        start, step = 0, 1000
        while True:
            with self._errors("scan"):
                chunk = self._client.lrange(self._k("d"), start, start + step - 1)
            yield from (decode_decision(raw) for raw in cast(list[bytes], chunk))
            if len(chunk) < step:
                return
            start += step

    def decision_count(self) -> int:
        with self._errors("count"):
            return int(self._client.llen(self._k("d")))

    def counters(self) -> dict[str, int]:
        names = ["revisits_unchanged", "revisits_changed", "decisions_total", "decisions_trimmed"]
        with self._errors("count"):
            values = self._client.hmget(self._k("meta"), names)
        return {n: int(v or 0) for n, v in zip(names, values, strict=True)}

    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Pipelined: script calls of 500 entries or decisions, 20 calls per round trip."""
        now = float(self.clock())
        n = 0
        with self._errors("import", write=True):
            pipe = self._client.pipeline(transaction=False)
            batch: list[Any] = []
            queued = 0

            def send(mode: str, final: bool = False) -> None:
                nonlocal queued
                if batch:
                    self._script(
                        keys=self._keys, args=self._head_args(mode, now) + batch, client=pipe
                    )
                    batch.clear()
                    queued += 1
                if queued >= 20 or (final and queued):
                    pipe.execute()
                    queued = 0

            for e in entries:
                check_key(e.key)
                fps = check_fingerprints(e.fingerprints)
                batch += [e.key, self._record(fps, e.key, e.stored_at, e.job, clean_text(e.text))]
                n += 1
                if len(batch) >= 2 * _BATCH:
                    send("add")
            send("add", final=True)
            for d in decisions:
                batch.append(encode_decision(d._replace(text=clean_text(d.text))))
                if len(batch) >= _BATCH:
                    send("decide")
            send("decide", final=True)
        return n

    def prune(self) -> int:
        """Delete every entry older than the TTL now (the sweep only reaches 2 * ttl)."""
        if self.ttl is None:
            return 0
        now = float(self.clock())
        with self._errors("prune", write=True):
            old = [
                eid
                for eid, raw in self._client.hscan_iter(self._k("e"), count=1000)
                if entry_head(raw)[1] < now - self.ttl
            ]
        removed = 0
        for i in range(0, len(old), _BATCH):
            removed += int(self._run("prune", self._head_args("prune", now) + old[i : i + _BATCH]))
        return removed

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._reply_fields:
                self._client.hdel(self._k("r"), *self._reply_fields)
        except self._redis.RedisError:
            pass  # the replies expire with their hash
        finally:
            self._closed = True
            self._client.close()


_OPTIONS = {
    "prefix",
    "name",
    "reset",
    "ttl",
    "max_decisions",
    "read_only",
    "clock",
    "blocks",
    "timeout",
    "params",
}


def _open(uri: str, rule: Rule | None = None, **options: Any) -> RedisStore:
    for ignored in ("commit_every", "commit_interval"):  # every call is a server transaction
        options.pop(ignored, None)
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise StoreError(f"redis store {rk.redact(uri, uri)}: unknown options {unknown}")
    return RedisStore(uri, rule, **options)


for _scheme in ("redis", "rediss", "unix"):
    register_store(_scheme, _open)
