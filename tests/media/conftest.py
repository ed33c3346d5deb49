"""Small synthesized clips shared by the media tests (made once per session)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ffdesk.media.synth import SynthResult, synth_clip


@pytest.fixture(scope="session")
def make_clip(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., SynthResult]:
    """`make_clip(name, **synth_clip_kwargs)`: synthesize once per session, then reuse."""
    folder = tmp_path_factory.mktemp("clips")
    made: dict[str, SynthResult] = {}

    def make(name: str, **kwargs: Any) -> SynthResult:
        if name not in made:
            kwargs.setdefault("width", 160)
            kwargs.setdefault("height", 96)
            kwargs.setdefault("frames", 12)
            made[name] = synth_clip(folder / name, **kwargs)
        return made[name]

    return make


@pytest.fixture(scope="session")
def plain(make_clip: Callable[..., SynthResult]) -> SynthResult:
    """20 frames at 25 fps, keyframe every 5 frames, B-frames, one AAC stream."""
    return make_clip("plain.mp4", frames=20, gop=5, audio_streams=1)


@pytest.fixture(scope="session")
def two_audio(make_clip: Callable[..., SynthResult]) -> SynthResult:
    return make_clip("two_audio.mp4", frames=15, audio_streams=2)


@pytest.fixture(scope="session")
def rotated(make_clip: Callable[..., SynthResult]) -> SynthResult:
    return make_clip("rot90.mp4", frames=10, rotation=90)


@pytest.fixture(scope="session")
def vfr(make_clip: Callable[..., SynthResult]) -> SynthResult:
    return make_clip("vfr.mp4", frames=20, vfr=True, gop=6)


@pytest.fixture(scope="session")
def odd(make_clip: Callable[..., SynthResult]) -> SynthResult:
    return make_clip("odd.mp4", width=721, height=405, frames=6)
