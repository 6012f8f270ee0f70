"""Every test here kills, fills, flushes or pauses a real part: marked ``fault`` so that CI runs
them once, on the newest leg (``-m "not fault"`` elsewhere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.redis_server import RedisServer

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.fault)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server of the test's own, which the test may kill, pause, flush or restart."""
    srv = RedisServer(tmp_path / "redis").start()
    yield srv
    srv.stop()
