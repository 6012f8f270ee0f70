"""``redis://host:port/db``, ``rediss://…``, ``unix:///path/redis.sock?db=0``: one index shared by
many crawler processes and machines.

Every check-and-add is one ``EVALSHA`` of a Lua script: the lookup in every block table and the
insert run as one atomic step on the server, so two workers can never both keep two
near-duplicates that arrive at the same moment, and each page costs one round trip.

Keys (``P`` is the prefix, default ``neardup:<spider>``, in braces so all keys of one store share
a Redis Cluster slot):

* ``{P}:meta``            hash: format, bits, distance, blocks (a store keeps its layout)
* ``{P}:seq``             counter: insertion sequence numbers
* ``{P}:g<G>:t<T>:<hex>`` hash: 128 buckets of block table T (field: the key's low 7 bits;
  the key name: its other bits); a bucket's value is its members end to end, 16 bytes each: the
  fingerprint and its sequence number, big-endian (exact 64-bit values, never float scores)
* ``{P}:g<G>:e``          hash: sequence number → ``["<fp hex>", stored_at, "<key>"]`` (JSON)
* ``{P}:d``               list of decisions (JSON), oldest first

``G`` is the generation. Without a TTL it is always 0. With ``ttl`` seconds, generation
``floor(now / ttl)`` receives new fingerprints, lookups read it and the one before, and each
generation's keys expire ``2 * ttl`` after it starts: a fingerprint is forgotten between ``ttl``
and ``2 * ttl`` after it was stored, so a recrawl months later can keep the page again.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..index import Layout, table_key
from .base import (
    Decision,
    Entry,
    Match,
    Store,
    StoreError,
    StoreUnavailable,
    check_key,
    register_store,
)

__all__ = ["RedisStore", "StoreUnavailable"]

FORMAT_VERSION = 1
_FIELD_BITS = 7  # 128 buckets per hash


# The atomic search-and-insert, one EVALSHA per page (see the file for its KEYS and ARGV).
_LUA = (importlib.resources.files(__package__) / "redis_check_and_add.lua").read_text("utf-8")


def _split_uri(uri: str) -> tuple[str, dict[str, str]]:
    """Take nearduppipe's own query parameters (prefix, ttl) out of a redis URI."""
    base, _, query = uri.partition("?")
    ours: dict[str, str] = {}
    rest = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in ("prefix", "ttl"):
            ours[name] = value
        else:
            rest.append((name, value))
    # string surgery, not urlunsplit, which would turn unix:///path into unix:/path
    return (base + "?" + urlencode(rest) if rest else base), ours


def _redact(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


class RedisStore(Store):
    def __init__(
        self,
        uri: str,
        distance: int = 3,
        blocks: int | None = None,
        *,
        prefix: str | None = None,
        name: str | None = None,
        ttl: float | None = None,
        reset: bool = False,
        timeout: float = 5.0,
    ) -> None:
        try:
            import redis
        except ImportError as e:  # pragma: no cover - redis is a dependency
            raise StoreError("the redis store needs the 'redis' package") from e
        self._redis_errors = (redis.ConnectionError, redis.TimeoutError)
        client_uri, params = _split_uri(uri)
        self.uri = _redact(uri)
        self.distance = distance
        self.prefix = params.get("prefix") or prefix or f"neardup:{name or 'default'}"
        ttl_param = params.get("ttl")
        self.ttl = float(ttl_param) if ttl_param else ttl
        if self.ttl is not None and self.ttl <= 0:
            raise StoreError(f"{self.uri}: ttl must be a positive number of seconds")
        # One table per pair of k + 2 blocks (keys of 21-26 bits): lookups read a handful of
        # members even with tens of millions stored, where k + 1 tables of 13-16-bit keys would
        # make the server scan hundreds per page (measured: benchmarks/redis_bench.py).
        self.layout = Layout(
            distance=distance, blocks=blocks if blocks is not None else distance + 2
        )
        self._tables = self.layout.tables()
        self._closed = False
        try:
            self._client = redis.Redis.from_url(
                client_uri,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                health_check_interval=30,
            )
        except ValueError as e:
            raise StoreError(f"{self.uri}: {e}") from e
        self._script = self._client.register_script(_LUA)
        with self._errors("open"):
            if reset:
                self._reset()
            self._check_meta(blocks)

    # -- keys --------------------------------------------------------------------------------
    def _k(self, *parts: str) -> str:
        return "{" + self.prefix + "}:" + ":".join(parts)

    def _generations(self, now: float) -> list[int]:
        if self.ttl is None:
            return [0]
        g = int(now // self.ttl)
        return [g, g - 1]

    def _block_keys(self, fp: int, gen: int) -> tuple[list[str], list[str]]:
        """Per table: the hash holding the bucket and the bucket's field. A bucket is the list
        of members with one key value; buckets are grouped 128 to a hash (the low 7 bits of the
        key name the field), so Redis pays its per-key overhead once per 128 buckets, and a
        small hash stays in its compact listpack form."""
        keys, fields = [], []
        for t, parts in enumerate(self._tables):
            value = table_key(fp, parts)
            keys.append(self._k(f"g{gen}", f"t{t}", f"{value >> _FIELD_BITS:x}"))
            fields.append(str(value & ((1 << _FIELD_BITS) - 1)))
        return keys, fields

    # -- errors ------------------------------------------------------------------------------
    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Closed → StoreError; unreachable or timed out → StoreUnavailable (the failure
        policy's business); anything else Redis says is a bug or a misconfiguration."""
        if self._closed:
            raise StoreError(f"store {self.uri} is closed")
        try:
            yield
        except self._redis_errors as e:
            raise StoreUnavailable(f"{self.uri}: {what} failed: {e}") from e

    def _check_meta(self, blocks: int | None) -> None:
        meta_key = self._k("meta")
        raw: dict[bytes, bytes] = self._client.hgetall(meta_key)  # type: ignore[assignment]
        meta = {k.decode(): v.decode() for k, v in raw.items()}
        want = {
            "format": str(FORMAT_VERSION),
            "bits": "64",
            "distance": str(self.distance),
            "blocks": str(self.layout.n_blocks),
        }
        if not meta:
            self._client.hset(meta_key, mapping=cast(Any, want))
            return
        if int(meta.get("format", "0")) > FORMAT_VERSION:
            raise StoreError(f"{self.uri} prefix {self.prefix}: written by a newer nearduppipe")
        layout = (meta.get("distance"), meta.get("blocks"))
        if layout != (want["distance"], want["blocks"]):
            raise StoreError(
                f"{self.uri} prefix {self.prefix}: the store was built for distance "
                f"{meta.get('distance')} with {meta.get('blocks')} blocks, not distance "
                f"{self.distance} with {self.layout.n_blocks}; use another prefix or reset it"
            )

    def _reset(self) -> None:
        pattern = "{" + self.prefix.replace("[", "\\[").replace("*", "\\*") + "}:*"
        batch: list[bytes] = []
        for key in self._client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                self._client.unlink(*batch)
                batch.clear()
        if batch:
            self._client.unlink(*batch)

    # -- the interface -----------------------------------------------------------------------
    def _call(
        self, mode: str, fp: int, key: str, now: float, client: Any = None, text: str | None = None
    ) -> Any:
        if not isinstance(fp, int) or not 0 <= fp < 1 << 64:
            raise ValueError("fingerprint must be an integer in [0, 2**64)")
        gens = self._generations(now)
        read: list[str] = []
        fields: list[str] = []
        for g in gens:
            k, f = self._block_keys(fp, g)
            read += k
            fields += f
        write, write_fields = self._block_keys(fp, gens[0])
        keys = [
            *read,
            *write,
            self._k(f"g{gens[0]}", "e"),
            self._k("d"),
            self._k("seq"),
            *(self._k(f"g{g}", "e") for g in gens),
        ]
        args: list[str | bytes | int] = [
            mode,
            fp.to_bytes(8, "big"),
            key,
            repr(round(now, 3)),
            self.distance,
            len(read),
            len(write),
            math.ceil(2 * self.ttl) if self.ttl else 0,
            len(gens),
            len(self._tables),
            f"{fp:016x}",
            "" if text is None else "\x00" + text,  # NUL prefix: an empty sample is not "none"
            *fields,
            *write_fields,
        ]
        if client is not None:  # queued on a pipeline; the caller executes it
            return self._script(keys=keys, args=args, client=client)
        with self._errors(mode):
            return self._script(keys=keys, args=args)

    @staticmethod
    def _match(row: Any) -> Match:
        distance, _, record = row
        fp_hex, _, key, *_ = json.loads(record)
        return Match(key, int(fp_hex, 16), int(distance))

    def near(self, fp: int) -> list[Match]:
        rows = self._call("near", fp, "", time.time())
        return [self._match(r) for r in rows if r[2]]

    def check_and_add(self, fp: int, key: str, text: str | None = None) -> Match | None:
        row = self._call("check", fp, check_key(key), time.time(), text=text)
        return self._match(row) if row else None

    def add(self, fp: int, key: str, text: str | None = None) -> None:
        self._call("add", fp, check_key(key), time.time(), text=text)

    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Pipelined: a batch of script calls per round trip."""
        n = 0
        batch: list[Entry] = []

        def send() -> None:
            with self._errors("import"):
                pipe = self._client.pipeline(transaction=False)
                for e in batch:
                    self._call(
                        "add",
                        e.fingerprint,
                        check_key(e.key),
                        e.stored_at,
                        client=pipe,
                        text=e.text,
                    )
                pipe.execute()
            batch.clear()

        for entry in entries:
            batch.append(entry)
            n += 1
            if len(batch) >= 1000:
                send()
        send()
        rows: list[str] = []
        for d in decisions:
            rows.append(
                json.dumps(
                    {
                        "key": d.key,
                        "fp": f"{d.fingerprint:016x}",
                        "match": d.matched_key,
                        "match_fp": f"{d.matched_fingerprint:016x}",
                        "distance": d.distance,
                        "t": round(d.decided_at, 3),
                    },
                    ensure_ascii=False,
                )
            )
            if len(rows) >= 1000:
                with self._errors("import"):
                    self._client.rpush(self._k("d"), *rows)
                rows.clear()
        if rows:
            with self._errors("import"):
                self._client.rpush(self._k("d"), *rows)
        return n

    def __len__(self) -> int:
        with self._errors("count"):
            return sum(
                int(self._client.hlen(self._k(f"g{g}", "e")))
                for g in self._generations(time.time())
            )

    def entries(self) -> Iterator[Entry]:
        rows = []
        for g in reversed(self._generations(time.time())):
            with self._errors("scan"):
                for seq, record in self._client.hscan_iter(self._k(f"g{g}", "e"), count=1000):
                    fp_hex, t, key, *text = json.loads(record)
                    rows.append((int(seq), Entry(key, int(fp_hex, 16), float(t), *text[:1])))
        rows.sort(key=lambda r: r[0])
        for _, entry in rows:
            yield entry

    def decisions(self) -> Iterator[Decision]:
        key, start, step = self._k("d"), 0, 1000
        while True:
            with self._errors("scan"):
                chunk = self._client.lrange(key, start, start + step - 1)
            for raw in chunk:
                r = json.loads(raw)
                yield Decision(
                    r["key"],
                    int(r["fp"], 16),
                    r["match"],
                    int(r["match_fp"], 16),
                    int(r["distance"]),
                    float(r["t"]),
                    r.get("text"),
                )
            if len(chunk) < step:
                return
            start += step

    def decision_count(self) -> int:
        with self._errors("count"):
            return int(self._client.llen(self._k("d")))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()


def _open(uri: str, distance: int = 3, **options: Any) -> RedisStore:
    for ignored in ("commit_every", "commit_interval"):  # every call is a server transaction
        options.pop(ignored, None)
    try:
        return RedisStore(uri, distance, **options)
    except TypeError as e:
        raise StoreError(f"redis store {_redact(uri)!r}: {e}") from e


for _scheme in ("redis", "rediss", "unix"):
    register_store(_scheme, _open)
