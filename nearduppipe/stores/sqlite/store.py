"""``sqlite:///relative.sqlite``, ``sqlite:////absolute.sqlite`` or a bare path: the default store.

One sqlitedict table in one file (records: :mod:`.records`; files and locks:
:mod:`.files`; the index snapshot read at open: :mod:`.snapshot`). Writes are
buffered and committed in the background (:mod:`.writer`): a row leaves the buffer only
once its commit succeeded, a lock held by another process is waited out within bounds, any other
failure is raised as :class:`StoreUnavailable`, and :meth:`flush` / :meth:`close` return within
about 10 s. One process writes a store (:class:`~.files.FileLock`); ``read_only=True``
never writes. Details and measured figures: docs/operations.md."""

from __future__ import annotations

import itertools
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...fingerprint.rule import Fingerprints, Rule
from ...index.columns import Column
from ..aliases import loaded_roots
from ..base import DEFAULT_MAX_DECISIONS, Decision, Entry, StoreError
from ..indexed import COUNTERS, IndexedStore
from ..scope import settle_rule
from ..ttl_rule import encode_ttl, settle_ttl
from .files import (
    FORMAT_VERSION,
    TABLE,
    FileLock,
    check_links,
    decode,
    encode,
    format_for,
    open_db,
    read_connection,
    scan_rows,
    sqlite_path,
)
from .keys import KeyFilter, key_hash
from .migrate import prepare_file, rule_of
from .records import (
    alias_record,
    decision_record,
    entry_record,
    key_record,
    live_rows,
    parse_alias,
    parse_decision,
    parse_entry,
    parse_entry_key,
    parse_key,
)
from .snapshot import (
    SNAPSHOT_TABLE,
    create_sql,
    live_columns,
    load_index,
    new_token,
    snapshot_statements,
)
from .writer import Snapshot, WriteOptions, Writer

__all__ = ["FORMAT_VERSION", "SqliteStore", "sqlite_path"]

logger = logging.getLogger("nearduppipe")


KEYS_PER_READ = 900  # (row keys per ``IN`` list: under SQLite's oldest limit of 999 variables)


def _rid(i: int) -> str:
    return f"{i:012x}"


class SqliteStore(IndexedStore):
    format_version = FORMAT_VERSION

    def __init__(
        self,
        path: str | os.PathLike[str],
        rule: Rule | None = None,
        *,
        blocks: int | None = None,
        reset: bool = False,
        commit_every: int = 1000,
        commit_interval: float = 1.0,
        busy_timeout: float = 5.0,
        max_pending: int = 200_000,
        retry_deadline: float = 300.0,
        read_only: bool = False,
        ttl: float | None = None,
        max_decisions: int | None = DEFAULT_MAX_DECISIONS,
        clock: Callable[[], float] = time.time,
        uri: str | None = None,
        change_ttl: bool = False,
    ) -> None:
        self.path = Path(path)
        self._change_ttl = bool(change_ttl)  # (ttl_rule: a writer changes the TTL on purpose)
        self._ttl_row: str | None = None  # the TTL to record once the store is loaded
        try:
            self.writing = WriteOptions(
                commit_every, commit_interval, busy_timeout, max_pending, retry_deadline
            )
        except ValueError as e:
            raise StoreError(f"{self.path}: {e}") from None
        self.read_only = read_only
        self._snapshot: str | None = None  # token of the snapshot the index was loaded from
        self._keys = KeyFilter()
        self._last_key = ("", 0)
        self._writer: Writer | None = None
        self._rid_column = Column(np.int64)  # index id -> the entry's row id (ascending)
        self._rids = self._rid_column.array
        self._state = {"rseq": 0, "dseq": 0, "dmin": 0}
        self._reader: sqlite3.Connection | None = None
        self._lock_file = FileLock(self.path)
        self._closed = False
        try:
            self._open(rule, blocks, reset, ttl, max_decisions, clock, uri)
        except BaseException:
            self._release(flush=False)
            raise

    # -- opening ---------------------------------------------------------------------------
    def _open(
        self,
        rule: Rule | None,
        blocks: int | None,
        reset: bool,
        ttl: float | None,
        max_decisions: int | None,
        clock: Callable[[], float],
        uri: str | None,
    ) -> None:
        where = uri or f"sqlite:///{self.path}"
        check_links(self.path, self.read_only)  # (before sqlite opens it by this name)
        prepare_file(self.path, self._lock_file, self.read_only, reset, rule)
        self._reader = read_connection(self.path) if self.path.exists() else None
        reader = self._reader
        stored_rule = rule_of(reader, where) if reader is not None and not reset else None
        rule = settle_rule(where, stored_rule, rule)
        super().__init__(
            where,
            rule or stored_rule or Rule(),
            blocks=blocks,
            ttl=ttl,
            max_decisions=max_decisions,
            clock=clock,
        )
        self.format_version = format_for(self.rule.aliases)  # (read-only opens too)
        if not self.read_only:
            self._open_writer(reset, stored_rule)
        if self._reader is not None and not reset:
            self._load()
        if self._writer is not None and self._ttl_row is not None:
            # (not before _load: every commit writes the m:state row, still empty before it)
            self._writer.buffer["m:ttl"] = encode(self._ttl_row)
            self._writer.commit()
        if self.ttl is not None and not self.read_only:
            pruned = self.prune()
            if pruned:
                logger.info(
                    "nearduppipe: %s: pruned %d entries older than the TTL", self.path, pruned
                )
                self.flush()

    def _open_writer(self, reset: bool, stored_rule: Rule | None) -> None:
        db = open_db(self.path, reset)
        st = self._lock_file.acquire_file()
        identity = (st.st_dev, st.st_ino)
        w = self._writer = Writer(self.path, db, identity, self._state_row, self.writing)
        for pragma in w.pragmas():
            w.statement(pragma)
        w.statement(create_sql())
        if self._reader is None:
            self._reader = read_connection(self.path)
        if reset or stored_rule is None:
            w.buffer["m:format"] = encode(self.format_version)
            w.buffer["m:created"] = encode(round(time.time(), 3))
            w.buffer["m:ttl"] = encode(encode_ttl(self.ttl))
        else:  # refused before the TTL prunes anything (_open); recorded after _load
            self._ttl_row = settle_ttl(self.uri, self._recorded_ttl(), self.ttl, self._change_ttl)
        if stored_rule != self.rule:
            if stored_rule is not None:
                logger.info(
                    "nearduppipe: %s: rule changed from %s to %s",
                    self.path,
                    stored_rule.describe(),
                    self.rule.describe(),
                )
            w.buffer["m:rule"] = encode(self.rule.as_dict())
            w.buffer["m:format"] = encode(self.format_version)
        w.commit(extra=[(f'DELETE FROM "{SNAPSHOT_TABLE}"', ())] if reset else [])

    def _recorded_ttl(self) -> str | None:
        """The TTL the store records (:mod:`..ttl_rule`; None: a store from before it)."""
        raw = self._row("m:ttl")
        value = None if raw is None else decode(raw, f"{self.path}: record m:ttl")
        if value is not None and not isinstance(value, str):
            raise StoreError(f"{self.path}: record m:ttl is damaged ({value!r})")
        return value

    def _load(self) -> None:
        assert self._reader is not None
        state, self._snapshot, loaded = load_index(self._reader, self.path)
        self._state.update({name: int(state.get(name, 0)) for name in self._state})
        self._counters.update({name: int(state.get(name, 0)) for name in COUNTERS})
        assert loaded.keys is not None
        alive, root1 = loaded_roots(loaded.rids, loaded.roots)
        if alive is not None and self._writer is not None and not bool(alive.all()):
            for rid in loaded.rids[~alive].tolist():  # aliases that stand for nothing
                self._writer.buffer[f"a:{rid:012x}"] = None
            self._snapshot = None  # (the rows change: the next close takes a snapshot)
        self._load_arrays(loaded.fps, loaded.wide, loaded.has_wide, loaded.times, alive, root1)
        self._keys.load(loaded.keys, np.ones(len(loaded.rids), dtype=bool), loaded.key_filter)
        self._rids = self._rid_column.reserve(len(loaded.rids))
        self._rids[: len(loaded.rids)] = loaded.rids
        if len(loaded.rids):
            self._state["rseq"] = max(self._state["rseq"], int(loaded.rids[-1]) + 1)
        if "new_total" not in state:  # (a store from before it was counted: its entries)
            self._counters["new_total"] = len(loaded.rids)

    # -- key ↔ id ----------------------------------------------------------------------------
    def _row(self, row_key: str) -> Any:
        if self._writer is not None:
            held, value = self._writer.lookup(row_key)
            if held:
                return value
        if self._reader is None:
            return None
        try:
            row = self._reader.execute(
                f'SELECT value FROM "{TABLE}" WHERE key = ?', (row_key,)
            ).fetchone()
        except sqlite3.DatabaseError as e:  # (a damaged page found by this read)
            raise StoreError(f"{self.path}: cannot read row {row_key!r}: {e}") from None
        return None if row is None else row[0]

    def _id_of_rid(self, rid: int) -> int | None:
        n = self._index.id_count
        i = int(np.searchsorted(self._rids[:n], rid))
        return i if i < n and self._rids[i] == rid and self._index.is_alive(i) else None

    def _hash(self, key: str) -> int:
        if self._last_key[0] != key:
            self._last_key = (key, key_hash(key))
        return self._last_key[1]

    def _find(self, key: str) -> tuple[int, str | None] | None:
        # every live entry's key (buffered or committed) is in the filter: "no" needs no lookup
        if not self._keys.may_hold(self._hash(key)):
            return None
        value = self._row("k:" + key)
        if value is None:
            return None
        rid, job = parse_key(value, f"{self.path}: record {'k:' + key!r:.90}")
        i = self._id_of_rid(rid)
        return None if i is None else (i, job)

    def _row_key(self, i: int) -> str:
        """The row of id ``i``: its entry's ``i:`` row, or an alias's ``a:`` row."""
        return ("a:" if self._root1[i] > 0 else "i:") + _rid(int(self._rids[i]))

    def _entry_at(self, i: int) -> Entry:
        row_key = self._row_key(i)
        value = self._row(row_key)
        if value is None:
            raise StoreError(f"{self.path}: record {row_key} is missing")
        if row_key[0] == "a":
            return parse_alias(value, f"{self.path}: record {row_key}")[0]
        return parse_entry(value, f"{self.path}: record {row_key}")

    def _key_of(self, i: int) -> str:
        return self._entry_at(i).key

    def _keys_at(self, ids: list[int]) -> list[str]:
        """Many entries' keys in a few reads (``dedup --against``'s matched rows: one ``IN``
        list per :data:`KEYS_PER_READ` rows instead of a statement per row), each row checked
        for its key alone."""
        where = f"{self.path}: record"
        return [parse_entry_key(v, f"{where} {k}") for k, v in self._values_at(ids)]

    def _alias_rows(
        self, ids: list[int], roots: list[int]
    ) -> list[tuple[str, str | None, str] | None]:
        """Each alias's row and its kept page's in a few reads; a row gone (a crawl writing
        the file this read-only store reads replaced it) gives ``None``."""
        where = f"{self.path}: record"
        values = self._values_at(ids + roots, missing_ok=True)
        out: list[tuple[str, str | None, str] | None] = []
        for (ak, av), (rk, rv) in zip(values[: len(ids)], values[len(ids) :], strict=True):
            if av is None or rv is None:
                out.append(None)
                continue
            alias = parse_alias(av, f"{where} {ak}")[0]
            out.append((alias.key, alias.job, parse_entry_key(rv, f"{where} {rk}")))
        return out

    def _values_at(self, ids: list[int], missing_ok: bool = False) -> list[tuple[str, Any]]:
        """(row key, value) of ids' rows, read as :meth:`_keys_at` says (a missing row: an
        error, or its value ``None`` if ``missing_ok``)."""
        row_keys = [self._row_key(i) for i in ids]
        values: dict[str, Any] = {}
        todo = []
        for row_key in row_keys:
            held, value = self._writer.lookup(row_key) if self._writer else (False, None)
            if held:
                values[row_key] = value
            else:
                todo.append(row_key)
        todo = sorted(set(todo))  # (in key order: neighbouring pages of the table)
        if self._reader is not None:
            for at in range(0, len(todo), KEYS_PER_READ):
                some = todo[at : at + KEYS_PER_READ]
                marks = ",".join("?" * len(some))
                try:
                    values.update(
                        self._reader.execute(
                            f'SELECT key, value FROM "{TABLE}" WHERE key IN ({marks})', some
                        ).fetchall()
                    )
                except sqlite3.DatabaseError as e:  # (a damaged page found by this read)
                    raise StoreError(f"{self.path}: cannot read rows {some[0]!r}..: {e}") from None
        out = []
        for row_key in row_keys:
            value = values.get(row_key)
            if value is None and not missing_ok:
                raise StoreError(f"{self.path}: record {row_key} is missing")
            out.append((row_key, value))
        return out

    def _extra_of(self, i: int) -> tuple[str | None, str | None]:
        e = self._entry_at(i)
        return e.text, e.job

    # -- writes ------------------------------------------------------------------------------
    def _writable(self) -> None:
        assert self._writer is not None
        self._writer.writable()
        self._snapshot = None  # about to change what a snapshot would hold

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
        # (the per-page path of every check: calls inlined where it measurably helps)
        rid = self._state["rseq"]
        self._state["rseq"] = rid + 1
        rids = self._rids
        if i >= len(rids):
            rids = self._rids = self._rid_column.reserve(i + 1)
        rids[i] = rid
        self._keys.add(i, self._hash(key), self._index.alive)
        w = self._writer
        assert w is not None
        buf = w.buffer
        if replaces is not None:
            buf[self._row_key(replaces)] = None
        buf["k:" + key] = key_record(rid, job)
        buf[f"i:{rid:012x}"] = entry_record(fps, t, job, key, text)
        w.after_write()

    def _persist_alias(
        self, i: int, key: str, fps: Fingerprints, t: float, job: str | None, root: int,
        replaces: int | None,
    ) -> None:  # fmt: skip
        rid = self._state["rseq"]
        self._state["rseq"] = rid + 1
        if i >= len(self._rids):
            self._rids = self._rid_column.reserve(i + 1)
        self._rids[i] = rid
        self._keys.add(i, self._hash(key), self._index.alive)
        buf = self._buf
        if replaces is not None:
            buf[self._row_key(replaces)] = None
        buf["k:" + key] = key_record(rid, job)
        buf[f"a:{rid:012x}"] = alias_record(fps, t, job, key, int(self._rids[root]))
        self._queued()

    def _persist_touch(self, i: int, key: str, t: float, job: str | None) -> None:
        e = self._entry_at(i)
        rid = int(self._rids[i])
        self._buf["k:" + key] = key_record(rid, job)
        self._buf["i:" + _rid(rid)] = entry_record(e.fingerprints, t, job, key, e.text)
        self._queued()

    def _persist_remove(self, i: int, key: str) -> None:
        self._buf["k:" + key] = None
        self._buf[self._row_key(i)] = None
        self._queued()

    def _persist_decision(self, decision: Decision) -> None:
        seq = self._state["dseq"]
        self._state["dseq"] = seq + 1
        self._buf["d:" + _rid(seq)] = decision_record(decision)
        if self.max_decisions is not None and seq + 1 - self._state["dmin"] > self.max_decisions:
            low = seq + 1 - self.max_decisions
            for s in range(self._state["dmin"], low):
                self._buf.pop("d:" + _rid(s), None)
            self._counters["decisions_trimmed"] += low - self._state["dmin"]
            self._state["dmin"] = low
            assert self._writer is not None
            self._writer.trim_below = "d:" + _rid(low)
        self._queued()

    @property
    def _buf(self) -> dict[str, str | None]:
        assert self._writer is not None
        return self._writer.buffer

    def _state_row(self, snapshot: str | None = None) -> tuple[str, str]:
        extra = {} if snapshot is None else {"snapshot": snapshot}
        return ("m:state", encode({**self._state, **self._counters, **extra}))

    def _queued(self) -> None:
        assert self._writer is not None
        self._writer.after_write()

    # -- reading back ----------------------------------------------------------------------
    def _scan(self, prefix: str) -> Iterator[tuple[str, Any]]:
        with self._lock:
            if self._writer is not None:
                self.flush()
        yield from scan_rows(self.path, prefix)

    def entries(self) -> Iterator[Entry]:
        rows = self._scan("i")
        while batch := list(itertools.islice(rows, 1024)):
            with self._lock:  # (a row no key points to is no page: not in the index)
                n = self._index.id_count
                live = live_rows(self.path, batch, self._rids[:n], self._index.alive())
            for (row_key, value), ok in zip(batch, live.tolist(), strict=True):
                if ok:
                    yield parse_entry(value, f"{self.path}: record {row_key}")

    def decisions(self) -> Iterator[Decision]:
        for row_key, value in self._scan("d"):
            yield parse_decision(value, f"{self.path}: record {row_key}")

    def decision_count(self) -> int:
        return self._state["dseq"] - self._state["dmin"]

    # -- durability and shutdown -----------------------------------------------------------
    def tick(self) -> None:
        with self._lock:
            if self._writer is not None and not self._closed and self._owned():
                self._writer.writable()
                self._writer.after_write()

    def flush(self) -> None:
        with self._lock:
            if self._writer is not None and self._owned():
                self._writer.commit()

    def _release(self, flush: bool = True) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close(flush, self._snapshot_statements)
        finally:
            self._lock_file.release()

    def _snapshot_statements(self) -> Snapshot | None:
        """The index columns for the next open (none if it was loaded from a snapshot and
        nothing changed since)."""
        if self._snapshot is not None:
            return None
        n = self._index.id_count
        token = new_token()
        root1 = self._root1[:n]
        roots = np.where(root1 > 0, self._rids[np.maximum(root1 - 1, 0)], -1)
        columns = (
            self._rids, self._index.fingerprints(), self._wide, self._has_wide, self._times, roots
        )  # fmt: skip
        live = live_columns(n, self._index.alive(), columns, self._keys)
        return lambda: self._state_row(token), snapshot_statements(token, live)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned():  # (a forked child leaves the writer, reader and lock to its parent)
                self._release()
