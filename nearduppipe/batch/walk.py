"""Pass 1's walk over the inputs on the driver (:func:`.records.dedup_records`): the jobs an
engine's fingerprint map may take, and what the driver keeps of each record."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from ..stores.report import host_of
from ..stores.scope import scope_of
from .bounded import OVERSIZED
from .core import Fields, Job
from .inputs import Input, open_input
from .keep import canonical_link

__all__ = ["Walk"]

NAMED = 10  # records over the size limit named (all are counted)


class Walk:
    """Pass 1's walk over every input in order, on the driver: the records' jobs for the
    engine's fingerprint map, and what the driver keeps of each record (host, scope, and what
    the keep rule reads: key, canonical link)."""

    def __init__(
        self,
        sources: list[Input],
        fields: Fields,
        params: FingerprintParams,
        rule: Rule,
        keep: str,
        keys: bool = False,
    ) -> None:
        self.sources, self.fields, self.params, self.rule = sources, fields, params, rule
        self.keep = keep
        self.with_keys = keys or keep != "first"  # (--against reads every key)
        self.hosts: dict[str, int] = {}
        self.host_ids = array("i")
        self.scopes: dict[str, int] = {}  # (under a scope narrower than global: stores/scope.py)
        self.scope_ids = array("i")
        self.keys: list[str] = []  # (only for a keep rule or --against, which read them)
        self.canonical: list[str | None] = []
        self.names: dict[str, None] = {}  # every field seen, in order (an output's CSV header)
        self.csv_header: dict[str, None] = {}
        self.ignored: Counter[str] = Counter()
        self.with_text = 0
        self.carried = 0  # records whose fingerprints came with them (--fingerprint-field)
        self.extracted = 0  # records whose text or HTML is fingerprinted
        self.oversized: list[str] = []  # the first records over the size limit, named
        self.oversized_count = 0
        self.reading: Any = None  # the reader being read
        self.read_before = 0  # bytes of the inputs read before it

    def jobs(self) -> Iterator[Job]:
        fields, i = self.fields, 0
        for source in self.sources:
            limit = fields.max_record_bytes
            with open_input(source, fields.key, fields.html, limit=limit) as reader:
                self.reading = reader
                for _, record in reader:
                    if not source.is_warc and len(self.names) < 10_000 and OVERSIZED not in record:
                        self.names.update(dict.fromkeys(record))
                    key = fields.key_of(record, i)
                    job = fields.job(record, self.params, f"record {i + 1} ({key})")
                    if OVERSIZED in record:
                        self.oversized_count += 1
                        if len(self.oversized) < NAMED:
                            self.oversized.append(str(record[OVERSIZED]))
                    self.carried += job[3] is not None and job[3].fingerprints is not None
                    self.extracted += job[0] is not None or job[1] is not None
                    if job[3] is not None or fields.text in record or fields.html in record:
                        self.with_text += 1
                    self.host_ids.append(self.hosts.setdefault(host_of(key), len(self.hosts)))
                    if self.rule.scope != "global":
                        name = scope_of(key, self.rule.scope)
                        self.scope_ids.append(self.scopes.setdefault(name, len(self.scopes)))
                    if self.with_keys:
                        self.keys.append(key)
                    if self.keep == "canonical":
                        html = record.get(fields.html)
                        ok = isinstance(html, (str, bytes))
                        self.canonical.append(canonical_link(html, key) if ok else None)
                    i += 1
                    yield job
                self.csv_header.update(dict.fromkeys(reader.fields))
                self.ignored.update(getattr(reader, "skipped", {}))
            self.read_before += reader.size
            self.reading = None

    def read(self) -> int:
        return self.read_before + (self.reading.position() if self.reading is not None else 0)
