"""The window's words for what the command line names: a render's refusal says `--matte alpha:
--encoder h264 ...`; the window says it with the names of its controls."""

from __future__ import annotations

import re

LTR = "\u200e"
"""A left-to-right mark, put before a line that starts with a file name: Qt takes a line's
direction from its first letter, and a clip named in Arabic or Hebrew made the whole line
right-to-left ("mp4: before rendering.مقطع فيديو", right-aligned)."""

CONTROL_NAMES = {
    "--encoder": "Output format",
    "--matte": "Matte",
    "--quality": "Quality",
    "--memory-budget": "Memory budget",
    "--batch": "Batch",
    "--precision": "Precision",
    "--mask-regions": "Mask regions",
    "--mask-blur": "Mask blur",
    "--mask-padding": "Mask padding",
    "--mask-areas": "Mask areas",
    "--enhancer-weight": "Enhancer weight",
    "--enhancer-blend": "Enhancer blend",
    "--video-preset": "Encoder speed",
    "--face-selection": "Faces",
}
"""The command line's options by the names of the controls that set them in this window."""


def in_controls_words(message: str) -> str:
    """A render's one-line refusal, which names the command line's options (`--matte alpha:
    --encoder h264 ...`), in the words of this window's controls ("Matte alpha: Output format
    h264 ..."); options without a control here stay as they are."""

    def control(match: re.Match[str]) -> str:
        return CONTROL_NAMES.get(match.group(0), match.group(0))

    return re.sub(r"--[a-z][a-z-]*", control, message)
