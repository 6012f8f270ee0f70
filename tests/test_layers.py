"""The folders are the layers: the package's imports, walked with ast (nothing is executed).

errors → fingerprint → index → stores (→ stores/sqlite, stores/redis) → batch → the Scrapy
face: each layer imports only the layers below it (errors.py, the exceptions' root, imports
nothing of the package and only the standard library), none imports Scrapy or Twisted, and no module imports
itself back through others (module-level, inside a function, or for type checking only: a
module that needs another's types is part of its circle all the same). The one allowed loop
is the store registry, which imports its bundled backends when a URI first needs one.

Within the Redis backend (stores/redis), no module reaches into another's private members:
what works on a store's shards (bulk imports, log compaction, the tables of names, the
buckets) uses the public methods of :class:`~nearduppipe.stores.redis.shard.Shard`, never
``store._client`` or ``store._errors``.

The face (and batch/) reach the stores through ``nearduppipe.stores`` and its modules that are
no backend: the ``Store`` interface and the backend objects (``backend_for``). None of them
imports a backend's module (``stores/sqlite/``, ``stores/redis/``, ``stores/memory.py``) or a
name starting with ``_`` from a store module, and the face never imports redis-py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (pytest depends on tomli there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nearduppipe"

# layer → the nearduppipe layers it may import ("face" is everything else: the Scrapy
# adapters, settings, runtime, reports and the command line, which may import anything)
ALLOWED = {
    "errors": set(),  # NearDupError, the root of every exception class: the bottom layer
    "fingerprint": {"fingerprint", "errors"},
    "index": {"index", "fingerprint", "errors"},
    "stores": {"stores", "index", "fingerprint", "errors"},
    "stores.sqlite": {"stores.sqlite", "stores", "index", "fingerprint", "errors"},
    "stores.redis": {"stores.redis", "stores", "index", "fingerprint", "errors"},
    "batch": {"batch", "stores", "index", "fingerprint", "errors"},
}
CORE_FORBIDDEN = {"scrapy", "twisted"}  # at any depth of a core module, even TYPE_CHECKING
# third-party libraries the fingerprint layer may use (besides the standard library); numba
# compiles the SimHash reduction (fingerprint/compiled.py), as it does the index's loops;
# selectolax finds the article's region of resiliparse's extraction versions 2-3 (fast_text.py)
FINGERPRINT_LIBS = {
    "trafilatura", "jieba", "rjieba", "xxhash", "numpy", "lxml", "resiliparse", "selectolax",
    "numba",
}  # fmt: skip
# the store registry loads its backends lazily (a function-level import: see stores/__init__;
# open_store and register_store, in stores/base.py, reach the registry in stores/backend.py)
REGISTRY = {
    ("nearduppipe.stores.base", "nearduppipe.stores"),
    ("nearduppipe.stores.base", "nearduppipe.stores.backend"),
    ("nearduppipe.stores.backend", "nearduppipe.stores"),
    ("nearduppipe.stores", "nearduppipe.stores.memory"),
    ("nearduppipe.stores", "nearduppipe.stores.redis"),
    ("nearduppipe.stores", "nearduppipe.stores.sqlite"),
}
# backends beside the stores.sqlite and stores.redis layers: modules of the stores layer that
# the face and batch/ may not import (they open a backend with open_store, or ask backend_for)
BACKEND_MODULES = {"nearduppipe.stores.memory"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # a module of the package, or a top-level external name
    line: int
    level: str  # "module", "function" or "type-checking"
    internal: bool
    name: str = ""  # the name ``from target import name`` takes, when it is no module

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.level}, line {self.line})"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root`` by dotted name (a package by its own name)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def edges(root: Path) -> list[Edge]:
    """Every import of every module under ``root``, resolved to the module it loads."""
    mods = modules(root)
    out: list[Edge] = []
    for name, path in mods.items():
        out += _module_edges(name, path, set(mods), root.name)
    return out


def _module_edges(name: str, path: Path, mods: set[str], top: str) -> list[Edge]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[Edge] = []

    def add(target: str, line: int, level: str, taken: str = "") -> None:
        internal = target == top or target.startswith(top + ".")
        target = target if internal else target.split(".")[0]
        out.append(Edge(name, target, line, level, internal, taken))

    def visit(node: ast.AST, level: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.body:
                    visit_one(sub, "type-checking")
                for sub in child.orelse:
                    visit_one(sub, level)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit_one(child, "function" if level == "module" else level)
            else:
                visit_one(child, level)

    def visit_one(child: ast.AST, level: str) -> None:
        if isinstance(child, ast.Import):
            for a in child.names:
                add(a.name, child.lineno, level)
        elif isinstance(child, ast.ImportFrom):
            if child.level:
                base = package.split(".")
                base = base[: len(base) - (child.level - 1)]
                mod = ".".join(base + ([child.module] if child.module else []))
            else:
                mod = child.module or ""
            for a in child.names:
                sub = f"{mod}.{a.name}"
                if sub in mods:
                    add(sub, child.lineno, level)
                else:
                    add(mod, child.lineno, level, a.name)
        visit(child, level)

    visit(ast.parse(path.read_text(encoding="utf-8")), "module")
    return out


def layer(module: str) -> str:
    parts = module.split(".")[1:]
    if parts[:2] in (["stores", "sqlite"], ["stores", "redis"]):
        return ".".join(parts[:2])
    if parts and parts[0] in ("errors", "fingerprint", "index", "stores", "batch"):
        return parts[0]
    return "face"


def forbidden(all_edges: list[Edge]) -> list[str]:
    """The edges that break the layering, each said with its place."""
    bad = []
    for e in all_edges:
        src = layer(e.source)
        if src == "face":
            continue
        if e.internal:
            dst = layer(e.target)
            if e.target == "nearduppipe":
                dst = "face"  # the package's own __init__ is the public face
            if dst not in ALLOWED[src] and (e.source, e.target) not in REGISTRY:
                bad.append(f"{e}: the {src} layer may not import the {dst} layer")
        elif e.target in CORE_FORBIDDEN:
            bad.append(f"{e}: the {src} layer may not import {e.target}")
        elif (
            src == "fingerprint"
            and e.target not in sys.stdlib_module_names
            and e.target not in FINGERPRINT_LIBS
            and e.target != "__future__"
        ):
            bad.append(f"{e}: the fingerprint layer may not import {e.target}")
        elif src == "errors" and e.target not in sys.stdlib_module_names | {"__future__"}:
            bad.append(f"{e}: the errors layer may not import {e.target}")
    return bad


def backend_reach(all_edges: list[Edge]) -> list[str]:
    """The imports by which the face or batch/ reach past the stores' public surface into a
    backend (at any level, TYPE_CHECKING too), each said with its place."""
    bad = []
    for e in all_edges:
        src = layer(e.source)
        if src not in ("face", "batch"):
            continue
        if not e.internal:
            if src == "face" and e.target == "redis":
                bad.append(f"{e}: the face may not call Redis itself (ask the store's backend)")
            continue
        if layer(e.target) in ("stores.sqlite", "stores.redis") or e.target in BACKEND_MODULES:
            bad.append(f"{e}: the {src} layer may not import a backend's module (use backend_for)")
        elif layer(e.target) == "stores" and e.name.startswith("_"):
            bad.append(f"{e}: the {src} layer may not import the private name {e.name}")
    return list(dict.fromkeys(bad))  # (one line for an import of several names)


def cycles(all_edges: list[Edge]) -> list[list[str]]:
    """Strongly connected groups of more than one module (or a module importing itself), over
    module-level, function-level and type-checking imports, less the registry's lazy
    loading."""
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        if not e.internal:
            continue
        if e.level == "function" and (e.source, e.target) in REGISTRY:
            continue
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm (the package is small: recursion is fine)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return groups


def test_no_import_cycle() -> None:
    found = cycles(edges(PACKAGE))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(g) for g in found)


# The names of a NamedTuple's own methods and fields list: its public API, underscored only so
# that they cannot clash with the fields' names (stores/checks.py cleans entries with _replace).
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}


def _own_private_names(tree: ast.Module) -> set[str]:
    """The private names the classes of a module define: methods, class attributes and what
    their methods assign to ``self._name`` or ``cls._name``."""
    out = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for n in ast.walk(cls):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.add(n.name)
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
            elif isinstance(n, ast.Assign):
                out.update(t.id for t in n.targets if isinstance(t, ast.Name))
            elif (
                isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id in ("self", "cls")
            ):
                out.add(n.attr)
    return {name for name in out if name.startswith("_")}


def private_reaches(root: Path) -> list[str]:
    """Every ``x._name`` in the modules under ``root`` where ``x`` is not ``self`` or ``cls``
    and no class of the module itself defines ``_name``: a module reaching into another
    module's private members (a store's ``_client``, ``_errors`` ...). Dunders and the
    NamedTuple API are public."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_private_names(tree)
        for n in ast.walk(tree):
            if (
                not isinstance(n, ast.Attribute)
                or not n.attr.startswith("_")
                or n.attr.endswith("__")
                or n.attr in NAMEDTUPLE_API | own
                or (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
            ):
                continue
            where = path.relative_to(root.parent).as_posix()
            bad.append(f"{where}:{n.lineno}: {ast.unparse(n)}")
    return bad


def test_the_redis_backend_reaches_into_no_private_member() -> None:
    """Bulk imports, loss detection, names, buckets, the log and the Cluster's modules use a
    shard's (or a store's) public methods: a store's private members are its own."""
    bad = private_reaches(PACKAGE / "stores" / "redis")
    assert not bad, "private members reached from outside their module:\n" + "\n".join(bad)


def test_layers_import_only_downwards() -> None:
    bad = forbidden(edges(PACKAGE))
    assert not bad, "\n".join(bad)


def test_the_face_reaches_backends_only_through_their_objects() -> None:
    """No import of stores/sqlite, stores/redis, stores/memory.py or of a private stores name
    from the face or batch/, and no redis-py in the face: the command line, ``scrapy neardup``
    and runtime/ use ``backend_for`` and the ``Store`` interface."""
    bad = backend_reach(edges(PACKAGE))
    assert not bad, "\n".join(bad)


def test_the_top_level_is_the_face() -> None:
    """Core code lives in the layers' folders: a module added at the top level is part of the
    Scrapy face, and is added here on purpose (errors.py, the bottom layer, is the one core
    module at the top level)."""
    top = sorted(m for m in modules(PACKAGE) if m.count(".") == 1)
    assert top == [
        "nearduppipe._runtime",
        "nearduppipe.addon",
        "nearduppipe.batch",
        "nearduppipe.cli",
        "nearduppipe.commands",
        "nearduppipe.errors",
        "nearduppipe.explain",
        "nearduppipe.fingerprint",
        "nearduppipe.index",
        "nearduppipe.middlewares",
        "nearduppipe.pipelines",
        "nearduppipe.report",
        "nearduppipe.runtime",
        "nearduppipe.settings",
        "nearduppipe.settings_redis",
        "nearduppipe.signals",
        "nearduppipe.stores",
    ]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "nearduppipe"
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return root


def test_the_walk_finds_what_it_must_refuse(tmp_path: Path) -> None:
    """The checks above are not vacuous: a package that breaks each rule is caught, by name."""
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "settings.py": "",
            "errors.py": "import attrs\nfrom .fingerprint import text\n",
            "fingerprint/__init__.py": "",
            "fingerprint/text.py": "import scrapy\nfrom ..index import search\n",
            "fingerprint/rule.py": "import redis\n",
            "index/__init__.py": "",
            "index/search.py": "from . import runs\n",
            "index/runs.py": "def f():\n    from .search import X\n",
            "stores/__init__.py": "def load():\n    from . import sqlite\n",
            "stores/base.py": "def open_store():\n    from .backend import backend_for\n",
            "stores/backend.py": "from .base import X\ndef backend_for():\n    from . import load\n",
            "stores/sqlite/__init__.py": "from ..base import open_store\n",
            "stores/memory.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from twisted.internet import reactor\n"
            "from ..settings import X\n",
            "batch/__init__.py": "from ..stores.sqlite import Y\nfrom ..stores import memory\n",
            "cli/__init__.py": "import redis.cluster\nfrom ..stores.base import _scheme, Store\n"
            "from ..stores import backend_for\nfrom ..stores.redis import buckets\n"
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ..stores.sqlite.files import TABLE\n",
            "stores/redis/__init__.py": "",
            "stores/redis/store.py": "from . import bulk\nclass S:\n    def f(self):\n"
            "        return self._client, self._own\n    _own = 1\n",
            "stores/redis/bulk.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .store import S\n"
            "def run(store: S, row):\n    return store._client, row._replace(), store.__dict__\n",
        },
    )
    found = edges(root)
    bad = "\n".join(forbidden(found))
    assert "nearduppipe.fingerprint.text -> scrapy (module, line 1)" in bad
    assert "nearduppipe.fingerprint.text -> nearduppipe.index.search" in bad
    assert "the fingerprint layer may not import redis" in bad
    assert "nearduppipe.errors -> attrs (module, line 1): the errors layer may not" in bad
    assert "nearduppipe.errors -> nearduppipe.fingerprint.text (module, line 2)" in bad
    assert "nearduppipe.stores.memory -> twisted (type-checking, line 3)" in bad
    assert "nearduppipe.stores.memory -> nearduppipe.settings" in bad
    assert "nearduppipe.batch -> nearduppipe.stores.sqlite (module" in bad
    assert "nearduppipe.batch -> nearduppipe.stores.memory" not in bad
    assert "nearduppipe.stores -> nearduppipe.stores.sqlite" not in bad  # the registry
    assert cycles(found) == [
        ["nearduppipe.index.runs", "nearduppipe.index.search"],
        ["nearduppipe.stores.redis.bulk", "nearduppipe.stores.redis.store"],  # type-checking
    ]
    assert private_reaches(root / "stores" / "redis") == ["redis/bulk.py:5: store._client"]
    reach = "\n".join(backend_reach(found))
    assert "nearduppipe.cli -> redis (module, line 1): the face may not call Redis" in reach
    assert "nearduppipe.cli -> nearduppipe.stores.base (module, line 2)" in reach
    assert "may not import the private name _scheme" in reach
    assert "(module, line 3)" not in reach  # backend_for, and Store on line 2, are public
    assert "nearduppipe.cli -> nearduppipe.stores.redis (module, line 4)" in reach
    assert "nearduppipe.cli -> nearduppipe.stores.sqlite.files (type-checking, line 7)" in reach
    assert "nearduppipe.batch -> nearduppipe.stores.memory (module, line 2)" in reach
    assert len(reach.splitlines()) == 6, reach


def test_core_imports_without_scrapy() -> None:
    code = (
        "import sys\n"
        "import nearduppipe.fingerprint, nearduppipe.index, nearduppipe.stores, nearduppipe.batch\n"
        "import nearduppipe.stores.sqlite, nearduppipe.stores.redis, nearduppipe.stores.memory\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_public_import_paths() -> None:
    """What README, docs and earlier releases name still imports; the Redis stores import
    without redis-py (only opening one needs the [redis] extra)."""
    code = (
        "import sys\n"
        "sys.modules['redis'] = None  # as if the [redis] extra were not installed\n"
        "import nearduppipe\n"
        "from nearduppipe import Addon, BlockIndex, Layout, Rule, open_store, simhash, features\n"
        "from nearduppipe.middlewares import NearDupMiddleware, NearDuplicatePage\n"
        "from nearduppipe.pipelines import NearDupPipeline\n"
        "from nearduppipe.signals import neardup_dropped\n"
        "from nearduppipe.stores import Store, StoreError, register_store\n"
        "from nearduppipe.stores.base import Entry, Decision, Match, Verdict\n"
        "from nearduppipe.stores.memory import MemoryStore\n"
        "from nearduppipe.stores.sqlite import SqliteStore, sqlite_path\n"
        "from nearduppipe.stores.redis import RedisStore, RedisClusterStore\n"
        "from nearduppipe.index import BlockIndex as B, Layout as L, table_keys, kernels\n"
        "from nearduppipe.batch import all_pairs, components, dedup_records, FeedReader\n"
        "from nearduppipe.report import render, report_from_store, Report\n"
        "from nearduppipe.cli import main\n"
        "from nearduppipe.commands import NearDupCommand\n"
        "from nearduppipe._runtime import NearDupRuntime\n"
        "assert callable(simhash) and callable(features) and callable(kernels)\n"
        "with open_store('memory:') as s:\n"
        "    assert len(s) == 0\n"
        "try:\n"
        "    open_store('redis://127.0.0.1:9/0')\n"
        "except StoreError as e:\n"
        "    assert \"pip install 'nearduppipe[redis]'\" in str(e), e\n"
        "else:\n"
        "    raise AssertionError('a Redis store opened without redis-py')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_package_data_ships_every_lua_file() -> None:
    """The wheel carries the Redis store's Lua program (the globs in pyproject.toml match every
    .lua file of the package, and the program reads them from where they are)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["nearduppipe"]
    shipped = {p for g in globs for p in PACKAGE.glob(g)}
    lua = set(PACKAGE.rglob("*.lua"))
    assert lua and lua <= shipped, sorted(str(p) for p in lua - shipped)
    from nearduppipe.stores.redis.program import CLUSTER, SINGLE3

    assert "modes()" in SINGLE3.script and "cluster_modes()" in CLUSTER.script


@pytest.mark.parametrize("layer_name", sorted(ALLOWED))
def test_every_layer_has_modules(layer_name: str) -> None:
    assert any(layer(m) == layer_name for m in modules(PACKAGE)), layer_name
