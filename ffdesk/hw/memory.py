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
