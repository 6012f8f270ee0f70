"""One exception root: every exception class the package defines derives from NearDupError
(keeping its built-in or Scrapy base), and the command line turns any of them into one line."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest
from scrapy.exceptions import DropItem, IgnoreRequest

import nearduppipe
from nearduppipe import NearDupError
from nearduppipe.errors import NearDupError as Root

from .support.cli import run

OPTIONAL = {"pyspark", "dask", "resiliparse", "pandas"}  # extras a module may need at import


def every_module() -> list[ModuleType]:
    """Every module of the package, imported (``__main__`` modules would run the command; a
    module whose optional dependency is missing is skipped)."""
    out = [nearduppipe]
    for info in pkgutil.walk_packages(nearduppipe.__path__, "nearduppipe."):
        if info.name.rpartition(".")[2] == "__main__":
            continue
        try:
            out.append(importlib.import_module(info.name))
        except ImportError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise
    return out


def package_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of the package (nested or private ones too:
    found through the subclass tree, not module attributes)."""
    every_module()
    found: dict[type[BaseException], None] = {}
    todo: list[type[BaseException]] = [BaseException]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in found:
                todo.append(sub)
                if sub.__module__.split(".")[0] == "nearduppipe":
                    found[sub] = None
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def test_the_root_is_public_and_the_bottom_layer() -> None:
    assert NearDupError is Root
    assert "NearDupError" in nearduppipe.__all__
    assert NearDupError.__bases__ == (Exception,)


def test_every_exception_class_derives_from_the_root() -> None:
    classes = package_exceptions()
    assert len(classes) >= 24, classes  # the walk finds them (not vacuous)
    stray = [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, Root)]
    assert not stray, "exception classes outside NearDupError: " + ", ".join(stray)


def test_the_old_bases_still_catch() -> None:
    from nearduppipe.batch.compression import FeedError
    from nearduppipe.fingerprint.fast_text import ExtractorUnavailable
    from nearduppipe.middlewares import ClaimedPage, NearDuplicatePage, UnchangedPage
    from nearduppipe.pipelines import NearDuplicateItem, RepeatedItem
    from nearduppipe.settings import NearDupConfigError
    from nearduppipe.stores.base import BadKey, StoreError

    assert issubclass(BadKey, ValueError) and issubclass(NearDupConfigError, ValueError)
    assert issubclass(FeedError, ValueError) and issubclass(ExtractorUnavailable, ImportError)
    for page in (NearDuplicatePage, UnchangedPage, ClaimedPage):
        assert issubclass(page, IgnoreRequest)
    assert issubclass(NearDuplicateItem, DropItem) and issubclass(RepeatedItem, DropItem)
    assert str(BadKey("an empty key")) == "an empty key"
    assert str(StoreError("x")) == "x"
    e = ExtractorUnavailable("pip install resiliparse")
    assert str(e) == "pip install resiliparse" and e.msg == "pip install resiliparse"
    assert str(RepeatedItem("k")) == "seen earlier in this crawl: k"
    with pytest.raises(NearDupError):
        raise RepeatedItem("k")


class Refused(NearDupError):
    """A plain NearDupError subclass, as a future module might define."""


@pytest.mark.parametrize(
    "error",
    [
        Refused("redis://user:s3cret@db:6379/0 refused\nthe second line"),
        Refused(),
        NearDupError("redis://user:s3cret@db:6379/0: no"),
        Refused("the server said: wrong password s3cret"),  # bare: the URI's secret
    ],
    ids=["subclass", "empty", "root", "bare-secret"],
)
def test_the_command_line_prints_any_nearduperror_as_one_line(
    monkeypatch: pytest.MonkeyPatch, error: NearDupError
) -> None:
    import nearduppipe.stores.redis.migrate as migrate

    def refuse(*args: object, **kwargs: object) -> int:
        raise error

    monkeypatch.setattr(migrate, "migrate", refuse)
    proc = run("migrate", "redis://user:s3cret@db:6379/0")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr and "s3cret" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nearduppipe migrate: ")
    assert lines[0] != "nearduppipe migrate:", "an empty message still names the error"
