"""The Redis store's fingerprint index, kept in each client and fed by the store's log.

Why in the client: an exact search within radius 8 reads ~740 buckets of the 3-block layout.
Kept in Redis, as hash fields, that was ~740 random lookups in hashes of millions of fields
per check (~1 us each, cache and TLB misses: ~1 ms of server time per check, the whole cost
at 1 M entries) plus the bucket rewrites on every insert. Here Redis keeps only what must be
shared: the records and an append-only log ``{P}:n`` of 16-byte members (fingerprint, entry
id: format 3's is the entry's 8-byte address, format 2's, the Cluster shards', a sequence
number), one per entry ever stored. Each client reads the log once at open
into a :class:`~nearduppipe.index.BlockIndex` (at its first search: commands that only read
records never pay for it) and then follows it: every check sends the
position its index has read up to, the script scans the members logged since (so the verdict
is exact whatever the other clients did meanwhile) and returns them, so the index stays
current without another round trip.

Removed and replaced entries leave their member in the log (an insert appends, nothing is
rewritten); the script skips ids whose record is gone (format 3: or holds another
fingerprint: an address outlives its entry). :func:`compact` rewrites the log
without them under a new *epoch* when they outnumber the live entries; a client whose epoch
is stale reloads. The epoch is random per store and per compaction, so a store reset and
rebuilt under the same prefix is never mistaken for the log a client read.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ...index.columns import Column
from ...index.layout import Layout
from ...index.search import BlockIndex

if TYPE_CHECKING:
    from .shard import Shard

__all__ = ["LogIndex", "append_members", "compact", "new_epoch"]

_CHUNK = 100_000  # log members per LRANGE while loading (1.6 MB)
_MEMBER = struct.Struct(">QQ")  # fingerprint, entry id
_U64 = np.uint64


def new_epoch() -> str:
    return os.urandom(8).hex()


def append_members(
    index: BlockIndex, ids: Column, blob: bytes, tag: int = 0, bulk: bool = False
) -> int:
    """Add log members (fingerprint, entry id; 16 bytes each, big-endian) to ``index``, and
    their entry ids, OR-ed with ``tag``, to ``ids`` at the same local ids (a column grows
    without copying: no pause at tens of millions of entries). Returns how many."""
    n0, n = index.id_count, len(blob) // 16
    if len(blob) % 16:
        raise ValueError(f"log members are 16 bytes each, not {len(blob)} bytes in all")
    if not n:
        return 0
    if not bulk and n <= 64:  # a check's reply (its own member, and a few from other clients):
        # no numpy temporaries, 1-2 µs a member instead of ~9 for one through arrays
        arr = ids.reserve(n0 + n)
        for j, (fp, entry) in enumerate(_MEMBER.iter_unpack(blob)):
            arr[n0 + j] = entry | tag
            index.add(fp)
        return n
    members = np.frombuffer(blob, dtype=">u8").reshape(-1, 2)
    ids.reserve(n0 + n)[n0 : n0 + n] = members[:, 1].astype(_U64) | _U64(tag)
    index.add_many(members[:, 0].astype(_U64))
    return n


class LogIndex:
    """A client's copy of the store's fingerprint index, at log position ``pos`` of ``epoch``.

    Thread-safe: the stores are shared by the threads of a crawl."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self.loaded = False
        self._reset("", 0)

    def _reset(self, epoch: str, pos: int) -> None:
        self.epoch = epoch
        self.pos = pos
        self.last = b""  # the member at pos - 1: a restored older log differs there
        self._index = BlockIndex(self.layout)
        self._ids = Column(_U64)  # local id -> entry id

    def load(self, client: Any, meta_key: str, log_key: str) -> None:
        """Read the whole log (one epoch: retried if a compaction switches it meanwhile)."""
        while True:
            pipe = client.pipeline(transaction=True)
            pipe.hget(meta_key, "epoch")
            pipe.llen(log_key)
            raw_epoch, length = pipe.execute()
            epoch = (raw_epoch or b"").decode()
            blobs = []
            for start in range(0, int(length), _CHUNK):
                stop = min(start + _CHUNK, int(length)) - 1
                blobs.append(b"".join(client.lrange(log_key, start, stop)))
            if (client.hget(meta_key, "epoch") or b"").decode() != epoch:
                continue
            with self._lock:
                self._reset(epoch, 0)
                self._append(b"".join(blobs), bulk=True)
                self.loaded = True
            return

    def _append(self, blob: bytes, bulk: bool = False) -> None:
        self._ids = self._ids.owned(self._index.id_count)  # (a forked child's own copy)
        self.pos += append_members(self._index, self._ids, blob, bulk=bulk)
        if blob:
            self.last = blob[-16:]

    def apply(self, start: int, blob: bytes, epoch: str) -> None:
        """Members logged from position ``start`` of ``epoch`` on (a reply's): append what
        is new here (another thread may have read some of them already)."""
        with self._lock:
            skip = self.pos - start
            if epoch != self.epoch or skip < 0:  # reloaded meanwhile: nothing to add
                return
            self._append(blob[16 * skip :])

    def catch_up(self, client: Any, meta_key: str, log_key: str) -> None:
        """Read the members logged since ``pos`` (native LRANGEs, each in a transaction with
        the epoch so that a compaction in between cannot shift them), or reload."""
        while True:
            with self._lock:
                pos, epoch = self.pos, self.epoch
            pipe = client.pipeline(transaction=True)
            pipe.hget(meta_key, "epoch")
            pipe.lrange(log_key, pos, pos + _CHUNK - 1)
            raw_epoch, members = pipe.execute()
            if (raw_epoch or b"").decode() != epoch:
                self.load(client, meta_key, log_key)
                return
            self.apply(pos, b"".join(members), epoch)
            if len(members) < _CHUNK:
                return

    def candidates(self, fp: int, radius: int) -> tuple[int, str, bytes, bytes]:
        """The position and epoch the index is at, the entry ids (8 bytes each) of every
        member within ``radius`` of ``fp`` logged before that position, and the last member
        read (the script checks that the log still has it there: a server restored from an
        older snapshot has the same epoch, and its log may have grown past the position)."""
        with self._lock:
            count = self._index.search_into(fp, radius)
            if not count:  # (most pages of a crawl: no numpy calls)
                return self.pos, self.epoch, b"", self.last
            ids = self._ids.array[self._index.hit_ids[:count]]
            return self.pos, self.epoch, ids.astype(">u8").tobytes(), self.last

    @property
    def nbytes(self) -> int:
        return int(self._index.nbytes + self._ids.nbytes)


def compact(shard: Shard) -> bool:
    """Rewrite the log of ``shard`` (a store's, or a Cluster shard's) without the members of
    removed entries, a chunk at a time (each chunk filtered by one short script call), then
    switch it in atomically with the members logged meanwhile. False if another client
    compacted or reset the store first."""
    client, meta, log, tmp = shard.client, shard.key("meta"), shard.key("n"), shard.key("c")
    pipe = client.pipeline(transaction=True)
    pipe.hget(meta, "epoch")
    pipe.llen(log)
    raw_epoch, length = pipe.execute()
    epoch = (raw_epoch or b"").decode()
    client.delete(tmp)
    for start in range(0, int(length), 10_000):
        chunk = b"".join(client.lrange(log, start, min(start + 10_000, int(length)) - 1))
        live = shard.call("compact", [*shard.head("live", 0.0, epoch=epoch), chunk])
        if live:
            client.rpush(tmp, *[live[i : i + 16] for i in range(0, len(live), 16)])
    done = shard.call(
        "compact", [*shard.head("switch", 0.0, epoch=epoch), int(length), new_epoch()]
    )
    return bool(done)
