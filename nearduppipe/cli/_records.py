"""Records a user edited by hand (or another program wrote) in a store a command reads.

A sqlite store's record errors name their row already. A Redis store's decoder sees only the
bytes (its callers read them in bulk), so a command that meets a damaged record asks the
backend to scan the store once more (:meth:`~nearduppipe.stores.Backend.damaged_records`) to
name its key and field, and says how to remove it. ``copy`` also says what it did not copy: rows
of a kind no store writes, entry records no page key points to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..stores import Store, StoreError, find_backend
from ._io import CliError, redact
from ._stores import backend_call, resolve_redis_prefix

__all__ = ["copy_warnings", "named_damage"]

_SHOWN = 3  # damaged records named in one message


@contextlib.contextmanager
def named_damage(uri: str, prefix: str | None = None) -> Iterator[None]:
    """Turn a store's damaged-record error into one line naming the key and field of each
    damaged record (the first few) and how to remove them."""
    try:
        yield
    except StoreError as e:
        backend = find_backend(uri)
        if backend is None or not backend.is_damage(e):
            raise
        if not backend.prefixed:  # a sqlite row that is not UTF-8 text, met by a scan
            rows = backend_call(lambda: backend.damaged_records(uri))
            if not rows:
                raise
            more = f" (and {len(rows) - 1} more rows)" if len(rows) > 1 else ""
            first = rows[0]
            raise CliError(f"{first.where}{more} is damaged ({first.why}); {first.fix}") from None
        after = getattr(e, "partial_copy", None)  # (cmd_copy: what the destination holds)
        e.args = (str(e).split("; DST ")[0],)
        then = f"; {after}" if after else ""
        if not backend.offers("damaged_records"):  # (a Redis Cluster store)
            raise CliError(f"{redact(uri)}: {e}; restore the store from a backup{then}") from None
        name = resolve_redis_prefix(uri, prefix)
        found = backend_call(lambda: backend.damaged_records(uri, name))
        if not found:  # (rewritten since: the record the command met)
            raise CliError(
                f"{redact(uri)} prefix {name!r}: {e}; run the command again{then}"
            ) from None
        shown = "; ".join(f"{d.where} ({d.why})" for d in found[:_SHOWN])
        more = f" (and {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
        fixes = " && ".join(d.fix for d in found[:_SHOWN])
        raise CliError(
            f"{redact(uri)} prefix {name!r}: {len(found)} damaged record(s), edited by hand or "
            f"written by another program: {shown}{more}. Remove them ({fixes}) or restore the "
            f"store from a backup, then run the command again{then}"
        ) from None


def copy_warnings(uri: str, prefix: str | None, store: Store, copied: int) -> list[str]:
    """What a copy of ``store`` (``copied`` entries) left behind, each in a line; nothing for a
    store as nearduppipe writes it."""
    if store.format_version not in (2, 3, 4):  # (format 1: several rows per key; not checked)
        return []
    backend = find_backend(uri)
    if backend is None or not backend.offers("leftovers"):
        return []
    name = resolve_redis_prefix(uri, prefix) if backend.prefixed else None
    return backend_call(lambda: backend.leftovers(uri, name, store, copied))
