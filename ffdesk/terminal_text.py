"""Text taken from files (a model file's name, a scope folder's, a queued job's message or path)
made safe to print on one terminal line.

A file name may hold any character but `/` and NUL: an ESC sequence in one (`\\x1b]0;TITLE\\a`,
`\\x1b[31m`) was printed raw by `models list` and `queue list`, so the terminal acted on it (set its
title, its colours, moved the cursor), and a newline in one broke a listing's lines. `terminal_line`
writes each such character as a visible escape instead; every other character, accents and CJK
included, is kept as it is.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

_UNSAFE = re.compile(
    "["
    "\x00-\x1f\x7f-\x9f"  # C0 controls (ESC, BEL, newlines, backspace...), DEL and the C1 controls (CSI, OSC)
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e\u2066-\u2069"  # bidirectional embeddings, overrides and isolates: reorder what is shown
    "\ud800-\udfff"  # lone surrogates: the undecodable bytes of a file name (os.fsdecode)
    "]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (surrogateescape): that byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_line(text: object) -> str:
    """`str(text)` with every character a terminal acts on rather than shows (C0 and C1 controls,
    ESC and DEL, newlines and tabs, line separators, bidirectional overrides) and every lone
    surrogate (an undecodable byte of a file name) written as a visible escape: `\\x1b`, `\\n`,
    `\\u202e`, `\\x9b`. Printable text, accented and CJK names included, is kept as it is."""
    return _UNSAFE.sub(_escape, str(text))
