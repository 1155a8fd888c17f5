"""How much memory Python allocated while something ran (tracemalloc's peak)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable


def peak_allocated(call: Callable[[], object]) -> int:
    """Bytes Python allocated at most while ``call()`` ran (its exceptions propagate)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
