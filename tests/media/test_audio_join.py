"""Audio in the final join: what is copied or re-encoded, and that every codec reaches the output."""

from __future__ import annotations

import pytest

from ffdesk.media.audio_plan import AudioChoice, default_layout, plan_audio


@pytest.mark.parametrize(
    ("codec", "bits", "suffix", "action", "target"),
    [
        ("aac", 16, ".mp4", "copy", "aac"),
        ("pcm_s16le", 16, ".mp4", "reencode", "aac"),
        ("pcm_s24le", 24, ".m4v", "reencode", "aac"),
        ("vorbis", 16, ".mp4", "reencode", "aac"),
        ("opus", 16, ".mp4", "copy", "opus"),
        ("pcm_s24le", 24, ".mov", "copy", "pcm_s24le"),
        ("opus", 16, ".mov", "reencode", "pcm_s16le"),
        ("flac", 24, ".MOV", "reencode", "pcm_s24le"),
        ("vorbis", 16, ".mkv", "copy", "vorbis"),
        ("pcm_s16le", 16, "mkv", "copy", "pcm_s16le"),
    ],
)
def test_plan_audio(codec: str, bits: int, suffix: str, action: str, target: str) -> None:
    choice = plan_audio(codec, bits, suffix)
    assert (choice.action, choice.codec) == (action, target)
    assert (choice.reason is None) == (action == "copy")


def test_plan_audio_reason_is_one_sentence() -> None:
    assert plan_audio("pcm_s16le", 16, ".mp4") == AudioChoice(
        "reencode", "aac", "pcm_s16le cannot go into .mp4: re-encoded to AAC"
    )
    assert plan_audio("flac", 24, ".mov").reason == "flac cannot go into .mov: re-encoded to PCM (pcm_s24le)"


def test_plan_audio_unknown_suffix_reencodes() -> None:
    choice = plan_audio("aac", 16, ".nope")
    assert choice.action == "reencode" and choice.codec == "aac" and choice.reason


def test_default_layout() -> None:
    assert [default_layout(n) for n in (1, 2, 6)] == ["mono", "stereo", "5.1"]
