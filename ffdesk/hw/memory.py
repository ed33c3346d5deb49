"""Host memory the C heap holds on to."""

from __future__ import annotations

import contextlib
import ctypes
import sys


def trim_heap() -> None:
    """Hand freed heap back to the OS (glibc `malloc_trim`; nothing elsewhere).

    glibc keeps freed blocks for reuse, spread over one arena per thread that allocated: a long
    render that opens and closes an encoder per segment on several threads grows its RSS from
    scraps it no longer uses unless they are given back now and then.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


LARGE_BLOCK_BYTES = 1 << 20
"""Blocks from this size up are mapped on their own and given back to the OS when freed
(`give_back_large_blocks`)."""
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number


def give_back_large_blocks() -> bool:
    """Have glibc map every block of `LARGE_BLOCK_BYTES` or more on its own, so freeing it gives
    the memory back at once; whether it took (glibc only).

    By default glibc raises that threshold each time such a block is freed, up to 32 MiB, so
    later model weights, activations and frames come from its arenas, and a render that loads
    and evicts models under a small budget leaves them scattered there: on the CPU, 16 frames of
    the full pack under a one-model budget peaked at 1117 MiB that way and at 991 MiB with the
    threshold fixed (22 loads each; 2.6% longer). It is a setting of the whole process.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES))
    except (OSError, AttributeError):
        return False
