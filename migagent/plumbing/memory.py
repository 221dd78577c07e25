"""Give the memory an attempt freed back to the system, so an idle agent's RSS is what it holds.

CPython frees small objects into its own arenas and large ones into the C allocator, and glibc's
malloc keeps freed heap pages mapped: after an attempt (a layout file parsed, an observation, a
plan, API responses) the process would stay at its high-water mark for as long as it idles. One
collection and glibc's `malloc_trim(0)` after an attempt that changed something (loops.agent says
when) return what is free. Elsewhere (musl, no libc found) only the collection runs.
"""

from __future__ import annotations

import ctypes
import gc


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded in this process: its C library among them
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):  # not glibc
        return None
    return libc


_LIBC = _glibc()


def release_free_memory() -> None:
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
