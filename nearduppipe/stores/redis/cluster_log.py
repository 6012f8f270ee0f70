"""A Redis Cluster store client's fingerprint index: one index over every shard's log.

Each shard keeps the single-node store's log (``{T}:n``, members of fingerprint and address;
see :mod:`.log`). One :class:`~nearduppipe.index.BlockIndex` holds the members of all shards,
each address with its shard beside it (a column of bytes: an address uses all 64 bits), so
a check searches once, not once per shard, and sends each shard the candidates that are its
own, with the position its log has been read to. A shard whose log was compacted or reset
(a new epoch) makes the whole index reload: the index cannot forget one shard's members
alone, and compactions are rare (at open and :meth:`prune`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...index.columns import Column
from ...index.layout import Layout
from ...index.search import BlockIndex
from .log import append_members

__all__ = ["ShardLogs"]

_CHUNK = 100_000  # members per read while loading (1.6 MB)
_U64 = np.uint64
# the epoch and a slice of the log in one atomic call (a compaction cannot shift it)
READ_LUA = """return {redis.call('HGET', KEYS[1], 'epoch') or '',
  redis.call('LRANGE', KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))}"""

Reader = Callable[[int, int, int], tuple[str, list[bytes]]]  # shard, start, stop -> epoch, slice


class ShardLogs:
    """The index and, per shard, the log position and epoch it has read. Thread-safe."""

    def __init__(self, layout: Layout, shards: int) -> None:
        self.layout = layout
        self.shards = shards
        self._lock = threading.Lock()
        self.loaded = False
        self._reset()

    def _reset(self) -> None:
        self.pos = [0] * self.shards
        self.epoch = [""] * self.shards
        self.last = [b""] * self.shards  # per shard, the member at pos - 1 (see log.py)
        self._index = BlockIndex(self.layout)
        self._ids = Column(_U64)  # local id -> address
        self._shard = Column(np.uint8)  # local id -> shard (at most 255)

    def load(self, read: Reader) -> None:
        """Read every shard's log from its start (a shard compacted meanwhile is read again)."""
        with self._lock:
            self._reset()
            for s in range(self.shards):
                self.epoch[s], blob = _read_log(read, s)
                self._append(s, blob, bulk=True)
            self.loaded = True

    def _append(self, shard: int, blob: bytes, bulk: bool = False) -> None:
        n0 = self._index.id_count
        self._ids = self._ids.owned(n0)  # (a forked child's own copy)
        self._shard = self._shard.owned(n0)
        n = append_members(self._index, self._ids, blob, bulk=bulk)
        self._shard.reserve(n0 + n)[n0 : n0 + n] = shard
        self.pos[shard] += n
        if blob:
            self.last[shard] = blob[-16:]

    def apply(self, shard: int, start: int, blob: bytes, epoch: str) -> None:
        """Members of ``shard`` logged from ``start`` of ``epoch`` on (a reply's): append the
        ones this index has not read yet."""
        with self._lock:
            skip = self.pos[shard] - start
            if epoch != self.epoch[shard] or skip < 0:
                return
            self._append(shard, blob[16 * skip :])

    def catch_up(self, shard: int, read: Reader) -> bool:
        """Read what ``shard`` logged since this index's position; False if its epoch changed
        (then the caller reloads everything)."""
        while True:
            with self._lock:
                pos, epoch = self.pos[shard], self.epoch[shard]
            e, part = read(shard, pos, pos + _CHUNK - 1)
            if e != epoch:
                return False
            self.apply(shard, pos, b"".join(part), epoch)
            if len(part) < _CHUNK:
                return True

    def candidates(self, fp: int, radius: int) -> list[tuple[int, str, bytes, bytes]]:
        """Per shard: the log position and epoch read, the addresses (8 bytes each) of the
        members within ``radius`` of ``fp`` logged before that position, and the last member
        read (a master restored from an older snapshot has another one there)."""
        with self._lock:
            count = self._index.search_into(fp, radius)
            hits = self._index.hit_ids[:count]
            shard_of = self._shard.array[hits]
            ids = self._ids.array[hits].astype(">u8")
            return [
                (self.pos[s], self.epoch[s], ids[shard_of == s].tobytes(), self.last[s])
                for s in range(self.shards)
            ]

    @property
    def nbytes(self) -> int:
        return int(self._index.nbytes + self._ids.nbytes + self._shard.nbytes)


def _read_log(read: Reader, shard: int) -> tuple[str, bytes]:
    while True:
        epoch: str | None = None
        blobs: list[bytes] = []
        start = 0
        while True:
            e, part = read(shard, start, start + _CHUNK - 1)
            if epoch is not None and e != epoch:
                break  # compacted between two slices: read it again
            epoch = e
            blobs.append(b"".join(part))
            start += len(part)
            if len(part) < _CHUNK:
                return epoch, b"".join(blobs)


def reader(client: Any, script: Any, keys: Callable[[int], tuple[str, str]]) -> Reader:
    """A :data:`Reader` over ``client`` (a cluster client routes each call to its shard's node)."""

    def read(shard: int, start: int, stop: int) -> tuple[str, list[bytes]]:
        meta, log = keys(shard)
        epoch, part = script(keys=[meta, log], args=[start, stop], client=client)
        return (epoch or b"").decode(), list(part)

    return read
