"""``memory:`` — an in-process store that forgets everything at close: tests, one-off runs."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..fingerprint.rule import Fingerprints, Rule
from .base import DEFAULT_MAX_DECISIONS, Decision, Entry, StoreError, register_store
from .indexed import IndexedStore
from .keymap import SHARD_BITS, KeyMap, Slots

__all__ = ["MemoryStore"]


class MemoryStore(IndexedStore):
    def __init__(
        self,
        uri: str = "memory:",
        rule: Rule | None = None,
        *,
        blocks: int | None = None,
        ttl: float | None = None,
        max_decisions: int | None = DEFAULT_MAX_DECISIONS,
        clock: Callable[[], float] = time.time,
        shard_bits: int = SHARD_BITS,
        chunk_bits: int = 14,
    ) -> None:
        super().__init__(
            uri, rule or Rule(), blocks=blocks, ttl=ttl, max_decisions=max_decisions, clock=clock
        )
        # key -> id, and per id its key, job and text: maps that grow in small steps (one
        # dict each made the caller wait for a resize of every entry: see stores.keymap).
        # ``shard_bits`` and ``chunk_bits`` set their step sizes (tests cross them).
        self._ids = KeyMap(shard_bits)
        self._keys: Slots[str] = Slots(chunk_bits)
        self._jobs: Slots[str] = Slots(chunk_bits)
        self._texts: Slots[str] = Slots(chunk_bits)
        self._decisions: deque[Decision] = deque()

    def _find(self, key: str) -> tuple[int, str | None] | None:
        i = self._ids.get(key)
        return None if i is None else (i, self._jobs[i])

    def _key_of(self, i: int) -> str:
        key = self._keys[i]
        assert key is not None
        return key

    def _extra_of(self, i: int) -> tuple[str | None, str | None]:
        return self._texts[i], self._jobs[i]

    def _persist_entry(
        self,
        i: int,
        key: str,
        fps: Fingerprints,
        t: float,
        job: str | None,
        text: str | None,
        replaces: int | None,
    ) -> None:
        if replaces is not None:
            self._forget(replaces)
        self._ids[key] = i
        self._keys[i] = key
        self._jobs[i] = job
        self._texts[i] = text

    def _persist_alias(
        self, i: int, key: str, fps: Fingerprints, t: float, job: str | None, root: int,
        replaces: int | None,
    ) -> None:  # fmt: skip
        self._persist_entry(i, key, fps, t, job, None, replaces)

    def _persist_touch(self, i: int, key: str, t: float, job: str | None) -> None:
        self._jobs[i] = job

    def _forget(self, i: int) -> None:
        self._keys[i] = self._jobs[i] = self._texts[i] = None

    def _persist_remove(self, i: int, key: str) -> None:
        del self._ids[key]
        self._forget(i)

    def _persist_decision(self, decision: Decision) -> None:
        self._decisions.append(decision)
        if self.max_decisions is not None and len(self._decisions) > self.max_decisions:
            self._decisions.popleft()
            self._counters["decisions_trimmed"] += 1

    def entries(self) -> Iterator[Entry]:
        with self._lock:
            # the order they were stored (a replacement moves last): live ids ascending
            ids = np.flatnonzero(self._index.alive() & (self._root1[: self._index.id_count] == 0))
            ids = ids.tolist()
            items = [Entry(self._key_of(i), *self._entry_parts(i)) for i in ids]
        yield from items

    def _entry_parts(self, i: int) -> tuple[int, float, str | None, int | None, str | None]:
        fps = self._fingerprints_of(i)
        return fps.fp, float(self._times[i]), self._texts[i], fps.wide, self._jobs[i]

    def decisions(self) -> Iterator[Decision]:
        with self._lock:
            items = list(self._decisions)
        yield from items

    def decision_count(self) -> int:
        return len(self._decisions)

    def close(self) -> None:
        self._closed = True


def _open(uri: str, rule: Rule | None = None, **options: Any) -> MemoryStore:
    # A memory store always starts empty and has nothing to commit.
    # (nor a recorded TTL to change: change_ttl, ttl_rule)
    for ignored in ("reset", "commit_every", "commit_interval", "name", "read_only", "change_ttl"):
        options.pop(ignored, None)
    known = {"blocks", "ttl", "max_decisions", "clock", "shard_bits", "chunk_bits"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise StoreError(f"memory store: unknown options {unknown}")
    return MemoryStore(uri, rule, **options)


register_store("memory", _open)
