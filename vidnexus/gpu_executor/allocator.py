"""Keeping freed memory in the process, so a CPU batch does not fault its activations in afresh.

glibc's malloc serves every block above its mmap threshold (128 KB at start) with a fresh ``mmap``
and returns it on ``free``; the threshold then rises to the largest block freed so far, but the
heap is trimmed whenever its free top passes twice that. A torch model on the CPU allocates tens
of such blocks per batch, so a served executor kept faulting and zeroing those pages on every
batch. Measured on the project's 2-core box (2026-11-28): a stack of 3×3 convolutions at batch 8
took ~25,000 page faults and twice the time per forward; MobileNetV3-small's ℓ(8) was 51–80 ms in
a served executor (whose warm-up never lifted the threshold) and 30 ms in the benchmark process
(which had, by profiling up to batch 32).

:func:`keep_freed_memory` fixes both thresholds (glibc's ``mallopt``): blocks up to
:data:`MMAP_THRESHOLD` come from the heap, and up to :data:`TRIM_THRESHOLD` of free heap stays with
the process. Every runner calls it when built. Where glibc's own ``MALLOC_MMAP_THRESHOLD_`` or
``MALLOC_TRIM_THRESHOLD_`` is set, the environment's choice stands; elsewhere than glibc it does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

logger = logging.getLogger(__name__)

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory", "ENV"]

MMAP_THRESHOLD = 32 << 20
"""Blocks up to this come from the heap (32 MiB: the largest glibc accepts on 64-bit)."""
TRIM_THRESHOLD = 512 << 20
"""Free heap kept by the process before malloc gives it back (the memory a process may hold
beyond what it uses: the activations of its largest batch, in practice)."""
ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
"""The same settings as glibc environment variables, for processes vidnexus starts but does not
run (``bench peers`` gives them to the peers' servers, so every system runs on the same malloc)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_lock = threading.Lock()
_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); whether fixed thresholds are
    in force (True too where the environment set them: its values stand; False where malloc is not
    glibc's)."""
    global _done
    with _lock:
        if _done is not None:
            return _done
        if any(k in os.environ for k in ENV):
            _done = True
            return _done
        try:
            mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
            _done = False
            return _done
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        if not _done:
            logger.warning("could not set malloc's thresholds: CPU batches may run slower")
        return _done
