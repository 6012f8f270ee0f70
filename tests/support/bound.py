"""What numba's dispatcher would run: the index and the stores call their compiled loops
without it (``nearduppipe.index.runs.bind``), so tests check they bound the same code."""

from __future__ import annotations

from typing import Any

import numba


def dispatched(kernel: Any, *args: Any) -> Any:
    """The compiled code the dispatcher picks for these arguments (None: none compiled yet)."""
    compiled = kernel.overloads.get(tuple(numba.typeof(a) for a in args))
    return None if compiled is None else compiled.entry_point
