"""Page keys, jobs and records as a format-3 Redis store holds them (issue #33 item 5).

A record keeps its page key as (prefix id, suffix) and its job as an id (:mod:`.format3`);
the prefixes (``scheme://host/``, shared by every page of a host) and job names are stored
once each, in the tables ``{P}:u`` / ``{P}:v`` (id -> prefix, prefix -> id) and ``{P}:j`` /
``{P}:w`` (the same for jobs). Ids are assigned by a script (one ``HINCRBY`` of a counter in
meta, then both directions), never changed, so every client encodes a key to the same bytes
and the store tells two keys apart by comparing them. Each client caches the tables it has
seen: a crawl pays one extra round trip per new host per process, none per page.

A page key's *address argument* (what the script takes instead of the key): the key's two
possible addresses, xxh3-64 of its UTF-8 bytes with seed 0 and with seed 1 (8 bytes each; the
second is used only when another key holds the first), then its key bytes (prefix id and
suffix, as the record holds them).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import xxhash

from ...fingerprint.rule import Fingerprints
from ..base import Alias, Entry, Match, StoreUnavailable
from .codec import NO_WIDE
from .format3 import Record, chunk, decode_record, encode_record, split_key, varint
from .keys import key

__all__ = ["Names"]

_Raw = TypeVar("_Raw")
_Loc = TypeVar("_Loc")  # where a record is: an address, or a Cluster's (shard, address)
_Row = TypeVar("_Row")

# assign ids to names: KEYS meta, id -> name, name -> id; ARGV counter field, names...
_ASSIGN_LUA = """if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NEARDUP_GONE the store meta key is missing')
end
local out = {}
for i = 2, #ARGV do
  local id = redis.call('HGET', KEYS[3], ARGV[i])
  if not id then
    id = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
    redis.call('HSET', KEYS[3], ARGV[i], id)
    redis.call('HSET', KEYS[2], id, ARGV[i])
  end
  out[#out + 1] = tonumber(id)
end
return out"""


class _Table:
    """One table (prefixes or jobs): both directions, cached."""

    def __init__(self, client: Any, prefix: str, ids: str, names: str, counter: str) -> None:
        self._client = client
        self._keys = [key(prefix, "meta"), key(prefix, ids), key(prefix, names)]
        self._counter = counter
        self._assign = client.register_script(_ASSIGN_LUA)
        self._ids: dict[str, int] = {"": 0}
        self._names: dict[int, str] = {0: ""}
        self._lock = threading.Lock()

    def _remember(self, name: str, i: int) -> None:
        with self._lock:
            self._ids[name] = i
            self._names[i] = name

    def id(self, name: str, assign: bool) -> int | None:
        """``name``'s id; assigned when new and ``assign`` (a write), else None."""
        found = self._ids.get(name)
        if found is not None:
            return found
        raw = self._client.hget(self._keys[2], name.encode("utf-8", "surrogatepass"))
        if raw is None:
            if not assign:
                return None
            (raw,) = self._assign(
                keys=self._keys, args=[self._counter, name.encode("utf-8", "surrogatepass")]
            )
        self._remember(name, int(raw))
        return int(raw)

    def names(self, ids: set[int]) -> None:
        """Read the names of ``ids`` not cached yet (one round trip)."""
        wanted = sorted(i for i in ids if i not in self._names)
        if not wanted:
            return
        for i, raw in zip(wanted, self._client.hmget(self._keys[1], wanted), strict=True):
            # (an id without a name: a table lost with its store; shown as such, not guessed)
            name = f"<unknown {i}>" if raw is None else raw.decode("utf-8", "surrogatepass")
            self._remember(name, i)

    def name(self, i: int) -> str:
        if i not in self._names:
            self.names({i})
        return self._names[i]

    def current(self) -> bool:
        """Whether every cached id still names the same thing in the store (one round trip;
        false after a reset gave an id to another name, or to none)."""
        with self._lock:
            known = [(i, n) for i, n in self._names.items() if i]
        if not known:
            return True
        raws = self._client.hmget(self._keys[1], [i for i, _ in known])
        return all(
            (raw is None and n.startswith("<unknown "))
            or (raw is not None and raw.decode("utf-8", "surrogatepass") == n)
            for (_, n), raw in zip(known, raws, strict=True)
        )


class Names:
    """A client's view of a format-3 store's prefix and job tables, and the encoding of keys
    and records that depends on them."""

    def __init__(self, client: Any, prefix: str, bucket_bits: int = 16) -> None:
        self._client = client
        self._prefix = prefix
        # a Redis Cluster store's shards have 2^bucket_bits buckets each (cluster_open.py):
        # the address's bits below them are zero, so an address names one bucket field
        self._mask = (0xFFFF << (16 - bucket_bits)) & 0xFFFF
        self.prefixes = _Table(client, prefix, "u", "v", "prefixes")
        self.jobs = _Table(client, prefix, "j", "w", "jobs")

    def forget(self) -> None:
        """Drop the cached ids: the store was reset (or restored) since they were read."""
        self.prefixes = _Table(self._client, self._prefix, "u", "v", "prefixes")
        self.jobs = _Table(self._client, self._prefix, "j", "w", "jobs")

    def address(self, page_key: str, assign: bool = True) -> bytes | None:
        """The address argument of ``page_key`` (module doc); None when its prefix is not in
        the store (and not ``assign``): then no entry has that key."""
        prefix, suffix = split_key(page_key)
        pid = self.prefixes.id(prefix, assign)
        if pid is None:
            return None
        raw = page_key.encode("utf-8", "surrogatepass")
        return (
            self._masked(xxhash.xxh3_64_digest(raw))
            + self._masked(xxhash.xxh3_64_digest(raw, seed=1))
            + varint(pid)
            + chunk(suffix)
        )

    def _masked(self, address: bytes) -> bytes:
        if self._mask == 0xFFFF:
            return address
        top = int.from_bytes(address[:2], "big") & self._mask
        return top.to_bytes(2, "big") + address[2:]

    def job_part(self, job: str | None) -> bytes:
        return varint(0 if job is None else self.job_id(job))

    def job_id(self, job: str) -> int:
        i = self.jobs.id(job, True)
        assert i is not None
        return i

    def record(
        self,
        fps: Fingerprints,
        page_key: str,
        t: float,
        job: str | None,
        text: str | None,
        seq: int = 0,
    ) -> bytes:
        """A record to store (its sequence number, 0, is the script's to set; a Redis Cluster
        store's carries its ticket there: :func:`.cluster_check.ticket_of`)."""
        prefix, suffix = split_key(page_key)
        pid = self.prefixes.id(prefix, True) or 0
        jid = 0 if job is None else self.job_id(job)
        return encode_record(Record(fps.fp, t, seq, fps.wide, jid, pid, suffix, text))

    def current(self) -> bool:
        """Whether the cached ids still hold (:meth:`_Table.current`): what a long read
        checks after decoding, since a reset meanwhile would have mixed two stores' ids."""
        prefixes, jobs = self.prefixes, self.jobs
        return prefixes.current() and jobs.current()

    def entries(self, raws: list[bytes]) -> list[tuple[int, Entry]]:
        """(sequence number, entry) of records, their names read in one round trip each."""
        recs = [r for r in map(decode_record, raws) if r.root is None]  # (aliases: no pages)
        self.prefixes.names({r.prefix_id for r in recs})
        self.jobs.names({r.job_id for r in recs})
        return [(r.seq, self._entry(r)) for r in recs]

    def aliases(
        self,
        rows: list[tuple[_Loc, bytes]],
        cutoff: float,
        root_at: Callable[[bytes], _Loc],
    ) -> list[tuple[int, Alias]]:
        """(sequence number, alias) of the aliases among a whole store's (place, record)
        ``rows`` that stand for an entry among them (the one at the place ``root_at`` reads
        from their root: an address, or a Cluster's shard and address; with the sequence
        number they hold) stored at ``cutoff`` or later (the TTL). Only the aliases and their
        kept pages are decoded."""
        aliases = [decode_record(raw) for _, raw in rows if raw[:1] >= b"\x04"]
        wanted = {root_at(r.root) for r in aliases if r.root is not None}
        kept = {a: decode_record(raw) for a, raw in rows if a in wanted and raw[:1] < b"\x04"}
        pairs = []
        for r in aliases:
            assert r.root is not None
            root = kept.get(root_at(r.root))
            seq = int.from_bytes(r.root[8:14], "big")
            if root is not None and root.seq == seq and root.stored_at >= cutoff:
                pairs.append((r, root))
        self.prefixes.names({x.prefix_id for pair in pairs for x in pair})
        self.jobs.names({r.job_id for r, _ in pairs})
        out = []
        for r, root in pairs:
            e, kept_key = self._entry(r), self.prefixes.name(root.prefix_id) + root.suffix
            out.append((r.seq, Alias(e.key, r.fp, r.stored_at, kept_key, r.wide, e.job)))
        return out

    def scan(
        self, read: Callable[[], list[bytes]], refresh: Callable[[], None], where: str
    ) -> list[Entry]:
        """The entries of the records ``read()`` returns (a whole store's), in the order
        stored (sequence numbers, or a Cluster's tickets), read again after ``refresh()``
        when a reset meanwhile changed the ids they were decoded with (:meth:`current`)."""
        return self.stable(read, self.entries, refresh, where)

    def stable(
        self,
        read: Callable[[], _Raw],
        decode: Callable[[_Raw], list[tuple[int, _Row]]],
        refresh: Callable[[], None],
        where: str,
    ) -> list[_Row]:
        """``decode(read())`` in sequence order, read again after ``refresh()`` when a reset
        meanwhile changed the ids the rows were decoded with (:meth:`current`)."""
        for _ in range(4):
            rows = decode(read())
            if self.current():
                rows.sort(key=lambda r: r[0])
                return [row for _, row in rows]
            refresh()
        raise StoreUnavailable(f"{where}: scan: the store kept being reset under this client")

    def entry(self, raw: bytes) -> Entry:
        return self.entries([raw])[0][1]

    def _entry(self, r: Record) -> Entry:
        page_key = self.prefixes.name(r.prefix_id) + r.suffix
        job = self.jobs.name(r.job_id) if r.job_id else None
        return Entry(page_key, r.fp, r.stored_at, r.text, r.wide, job)

    def match(self, raw: bytes, pos: int = 0) -> tuple[Match, int]:
        """A script reply item: distance(2) wide(2) record length(4) record."""
        d, wide, n = struct.unpack_from(">HHI", raw, pos)
        e = self.entry(raw[pos + 8 : pos + 8 + n])
        return Match(e.key, e.fingerprint, d, None if wide == NO_WIDE else wide), pos + 8 + n
