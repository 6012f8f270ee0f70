"""One backend object per URI scheme: what the Scrapy face and the command line may ask of a
backend besides the :class:`~.base.Store` interface.

A :class:`Backend` opens its stores (:meth:`Backend.open`, what :func:`~.base.open_store`
calls) and answers questions about the place a URI names without opening a store there: the
file a URI names, the stores a server holds, the metadata a store records, which server a URI
reaches, the records of a store that cannot be read, what a copy left behind, a migration.
Those reads never write. An operation a backend does not offer raises :class:`Unsupported`
(one line, a :class:`~.base.StoreError`); :meth:`Backend.offers` asks first.

:func:`register_backend` registers an object for a scheme; :func:`~.base.register_store` still
takes a plain factory (wrapped in a :class:`FactoryBackend`, which offers opening only).
:func:`backend_for` finds the object for a URI (loading the bundled backends first), and
:func:`scheme_of` is the scheme a URI names (a bare path is a sqlite file).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Store, StoreError

if TYPE_CHECKING:
    from ..fingerprint.rule import Rule

__all__ = [
    "Backend",
    "Damage",
    "FactoryBackend",
    "Migration",
    "StoreListing",
    "Unsupported",
    "backend_for",
    "find_backend",
    "register_backend",
    "scheme_of",
]


@dataclass(frozen=True)
class Migration:
    """How a migration runs: ``batch`` entries at a time, ``pause`` seconds apart,
    ``progress`` told of each step; one migration of a store at a time (``wait``: wait for
    the other one, telling ``on_wait``, instead of refusing)."""

    batch: int = 1000
    pause: float = 0.0
    progress: Callable[[str], None] | None = None
    wait: bool = False
    on_wait: Callable[[str], None] | None = None

    def options(self) -> dict[str, Any]:
        """As keyword arguments (the callables as they are, not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


MIGRATION = Migration()


class Unsupported(StoreError):
    """An operation the backend of a scheme does not offer (a plain factory offers opening
    only)."""


@dataclass(frozen=True)
class StoreListing:
    """One store a server holds: its name (a Redis store's key prefix) and the metadata it
    records."""

    name: str
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Damage:
    """A record of a store that cannot be read: where it is, what is wrong with it, and what
    to run to remove it."""

    where: str
    why: str
    fix: str


_OPERATIONS = {
    "with_file": "name a file",
    "list_stores": "list the stores a server holds",
    "meta": "read a store's metadata without opening it",
    "identity": "tell which server a URI reaches",
    "damaged_records": "find a store's damaged records",
    "migrate": "migrate a store",
}


class Backend(ABC):
    """The operations of one URI scheme's backend. Only :meth:`open` is required; the others
    raise :class:`Unsupported` (or answer "nothing": :meth:`file`, :meth:`is_damage`,
    :meth:`leftovers`) unless the backend offers them."""

    #: what messages call the backend ("sqlite", "redis", …)
    name: str = "store"
    #: a server of this backend holds several stores, each named by a key prefix (Redis):
    #: :meth:`list_stores`, :meth:`meta` and :meth:`identity` take that name
    prefixed: bool = False

    @abstractmethod
    def open(self, uri: str, *, rule: Rule | None = None, **options: Any) -> Store:
        """The store ``uri`` names (what :func:`~.base.open_store` returns)."""

    def offers(self, operation: str) -> bool:
        """Whether this backend implements ``operation`` (a method name of :class:`Backend`)."""
        return getattr(type(self), operation, None) is not getattr(Backend, operation, None)

    def accepts(self, option: str) -> bool:
        """Whether :meth:`open` takes the backend-specific keyword ``option`` (``params``: the
        Redis client's options)."""
        return False

    def file(self, uri: str) -> Path | None:
        """The local file the store of ``uri`` is (``None`` for a backend without files); a
        malformed URI is a :class:`~.base.StoreError`."""
        return None

    def with_file(self, uri: str, path: Path) -> str:
        """``uri`` naming the file ``path`` instead, spelled as ``uri`` was."""
        raise self._unsupported("with_file")

    def list_stores(self, uri: str) -> list[StoreListing]:
        """Every store the server of ``uri`` holds, by name; reads only."""
        raise self._unsupported("list_stores")

    def meta(self, uri: str, name: str | None = None) -> dict[str, str] | None:
        """The metadata the store records (``ttl``, ``format``, …), read without opening it
        and without writing; ``None`` when no store is there."""
        raise self._unsupported("meta")

    def identity(self, uri: str, name: str) -> Hashable:
        """What names the store whatever the URI's spelling (the server's run id and database,
        or a cluster's node ids, with ``name``): equal for two URIs that reach one store."""
        raise self._unsupported("identity")

    def is_damage(self, error: BaseException) -> bool:
        """Whether ``error`` (raised by a store of this backend) says a record cannot be read,
        which :meth:`damaged_records` can name."""
        return False

    def damaged_records(self, uri: str, name: str | None = None) -> list[Damage]:
        """Every record of the store that cannot be read (edited by hand, or another
        program's), with how to remove it; reads only."""
        raise self._unsupported("damaged_records")

    def leftovers(self, uri: str, name: str | None, store: Store, copied: int) -> list[str]:
        """What a copy of ``store`` (``copied`` entries) left behind, one line each: records of
        no kind a store writes, entry records no page key points to. Nothing for a store as
        nearduppipe writes it, or a backend that cannot tell."""
        return []

    def migrate(self, uri: str, name: str | None = None, how: Migration = MIGRATION) -> int:
        """Convert the store to the current format in place, as ``how`` says (batches, pauses,
        waiting for another migration). The entries this run moved."""
        raise self._unsupported("migrate")

    def _unsupported(self, operation: str) -> Unsupported:
        return Unsupported(f"the {self.name} store backend cannot {_OPERATIONS[operation]}")


class FactoryBackend(Backend):
    """What :func:`~.base.register_store` makes of a plain factory: it opens stores, and
    offers nothing else."""

    def __init__(self, scheme: str, factory: Callable[..., Store]) -> None:
        self.name = scheme
        self.factory = factory

    def open(self, uri: str, *, rule: Rule | None = None, **options: Any) -> Store:
        return self.factory(uri, rule=rule, **options)


_BACKENDS: dict[str, Backend] = {}


def register_backend(scheme: str, backend: Backend) -> None:
    """Make ``scheme`` (lower case) open with ``backend`` and :func:`backend_for` return it."""
    if not isinstance(backend, Backend):
        raise TypeError(f"a store backend is a Backend, not {type(backend).__name__}")
    _BACKENDS[scheme] = backend


def scheme_of(uri: str) -> str:
    """The scheme a store URI names, in lower case; a bare path (no scheme, or a one-letter
    Windows drive) is a sqlite file."""
    head, sep, _ = uri.partition(":")
    if not sep or len(head) <= 1 or "/" in head or "\\" in head:
        return "sqlite"
    return head.lower()


def find_backend(uri: str) -> Backend | None:
    """The backend of ``uri``'s scheme, or ``None`` for a scheme no backend registered."""
    from . import _load_builtin_backends

    _load_builtin_backends()
    return _BACKENDS.get(scheme_of(uri))


def backend_for(uri: str) -> Backend:
    """The backend of ``uri``'s scheme; an unknown scheme is a :class:`~.base.StoreError`
    listing the known ones."""
    backend = find_backend(uri)
    if backend is None:
        known = ", ".join(sorted(f"{s}:" for s in _BACKENDS))
        raise StoreError(f"unknown store scheme {scheme_of(uri)!r} in {uri!r}; known: {known}")
    return backend
