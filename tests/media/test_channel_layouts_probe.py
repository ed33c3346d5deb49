"""`ffdesk probe` on the clips of `test_channel_layouts`: a MOV whose channels are in custom order
aborted it ("double free or corruption"); a 12-channel track was "taken as stereo" with nothing to
watch out for. Each probe runs in a child process, so a crash fails the test, not pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.media.test_channel_layouts import (
    MPEG_6_1_A,
    MPEG_7_1_A,
    MPEG_7_1_C,
    _child,
    _crashed,
    _retag,
    _write,
)


def _probe(clip: Path, *more: str) -> list[str]:
    run = _child("-m", "ffdesk", "probe", str(clip), *more)
    assert run.returncode == 0, _crashed(run)
    return [line for line in run.stdout.splitlines() if line.startswith("audio #1")]


@pytest.mark.parametrize(
    ("layout", "tag", "labels"),
    [
        ("7.1", MPEG_7_1_C, "FL+FR+FC+LFE+SL+SR+BL+BR"),
        ("6.1", MPEG_6_1_A, "FL+FR+FC+LFE+SL+SR+BC"),
        ("7.1(wide-side)", MPEG_7_1_A, "FL+FR+FC+LFE+SL+SR+FLC+FRC"),
    ],
)
def test_probe_names_the_channels_of_a_mov_in_custom_order(
    tmp_path: Path, layout: str, tag: int, labels: str
) -> None:
    clip = _retag(_write(tmp_path / "clip.mov", layout), tag)
    stream, plan = _probe(clip)  # for an .mp4: AAC, in FFmpeg's order of the same channels
    count = len(labels.split("+"))
    assert f"{count} ch ({labels})" in stream
    assert plan.startswith(f"audio #1    re-encode -> aac, {count} ch, {labels}, written as {layout};")
    _, plan = _probe(clip, "--output", "x.mov")
    assert plan.startswith(f"audio #1    copy -> pcm_s24le, {count} ch, {labels};")


def test_probe_says_what_a_render_does_with_twelve_channels(tmp_path: Path) -> None:
    clip = _write(tmp_path / "poly12.mov", "12 channels")
    stream, plan = _probe(clip, "--output", "x.mov")
    assert "12 ch (no layout)" in stream
    assert plan.startswith("audio #1    copy -> pcm_s24le, 12 ch, in the file's order")
    _, plan = _probe(clip, "--output", "x.mp4")
    assert plan.startswith("audio #1    re-encode -> pcm_s24le, 12 ch, taken as 7.1.4")
    assert "nor can AAC hold its 12 channels" in plan and "stereo" not in plan
