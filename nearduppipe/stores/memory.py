"""``memory:`` — an in-process store that forgets everything at close: tests, one-off runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import Decision, Entry, IndexedStore, StoreError, register_store

__all__ = ["MemoryStore"]


class MemoryStore(IndexedStore):
    def __init__(self, uri: str = "memory:", distance: int = 3, blocks: int | None = None) -> None:
        super().__init__(uri, distance, blocks)
        self._keys: list[str] = []
        self._times: list[float] = []
        self._texts: list[str | None] = []
        self._decisions: list[Decision] = []

    def _key_of(self, i: int) -> str:
        return self._keys[i]

    def _save_entry(self, i: int, fp: int, key: str, now: float, text: str | None) -> None:
        self._keys.append(key)
        self._times.append(now)
        self._texts.append(text)

    def _save_decision(self, decision: Decision) -> None:
        self._decisions.append(decision)

    def entries(self) -> Iterator[Entry]:
        with self._lock:
            fps = self._index.fingerprints().tolist()
            items = list(zip(self._keys, fps, self._times, self._texts, strict=True))
        for key, fp, t, text in items:
            yield Entry(key, fp, t, text)

    def decisions(self) -> Iterator[Decision]:
        with self._lock:
            items = list(self._decisions)
        yield from items

    def decision_count(self) -> int:
        return len(self._decisions)

    def close(self) -> None:
        self._closed = True


def _open(uri: str, distance: int = 3, **options: Any) -> MemoryStore:
    blocks = options.pop("blocks", None)
    # A memory store always starts empty and has nothing to commit.
    for ignored in ("reset", "commit_every", "commit_interval", "name"):
        options.pop(ignored, None)
    if options.pop("ttl", None) is not None:
        raise StoreError("memory store: ttl is supported by the redis store only")
    if options:
        raise StoreError(f"memory store: unknown options {sorted(options)}")
    return MemoryStore(uri, distance, blocks)


register_store("memory", _open)
