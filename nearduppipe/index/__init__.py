"""The index layer: exact Hamming-ball search over 64-bit fingerprints with block tables.

What a full scan would return, found through pigeonhole block tables (:mod:`.layout` chooses
them, :mod:`.runs` and :mod:`.columns` hold them, :mod:`.compiled` scans them, :mod:`.schedule`
decides which merge, :mod:`.merge` and :mod:`.steps` merge them a slice per add, :mod:`.joins`
joins a whole run for batch dedup); imports only the fingerprint layer.
"""

from __future__ import annotations

from .layout import Layout, table_key, table_keys
from .runs import kernels
from .search import SYNC_MERGE, BlockIndex

__all__ = ["SYNC_MERGE", "BlockIndex", "Layout", "kernels", "table_key", "table_keys"]
