"""The lip syncer alone (no swapper model, no source photo) honours `--mask occlusion` with the
job's own occluder, as FaceFusion's lip syncer does when its mask types hold 'occlusion': on
carphone with a blue bar in front of the mouth (an XSeg stand-in whose mask follows the picture:
skin kept, blue left out) the bar stays as it was, where under the box mask alone the stand-in's
dark mouth is drawn over it; the mouth above the bar is still redrawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.runtime.standins import write_standins
from tests.modelpacks.helpers import content_masks
from tests.pipeline.barred_clip import BAR, bar_moved, barred_clip
from tests.pipeline.test_processor_occlusion import render
from tests.swap.test_lip_sync import write_wav

MOUTH = (slice(66, 84), slice(60, 110))
"""The lips, right above the bar, in carphone's 176 x 144 frame (the first 0.3 s)."""


def moved(frames: list[np.ndarray], plain: list[np.ndarray], where: tuple[slice, slice]) -> list[int]:
    """Each frame's largest change from the plain render within `where` (0-255)."""
    pairs = zip(frames, plain, strict=True)
    return [int(np.abs(f[where].astype(int) - p[where].astype(int)).max()) for f, p in pairs]


def mean_moved(frames: list[np.ndarray], plain: list[np.ndarray], where: tuple[slice, slice]) -> float:
    pairs = zip(frames, plain, strict=True)
    return float(np.mean([np.abs(f[where].astype(int) - p[where].astype(int)).mean() for f, p in pairs]))


def test_alone_the_lip_syncer_keeps_what_is_in_front_of_the_mouth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "models"
    pack.mkdir()
    write_standins(pack, ["wav2lip_gan_96"])
    content_masks(pack)
    barred = barred_clip(tmp_path)
    # loud broadband noise: the stand-in draws the mouth black (a pure tone barely darkens it)
    noise = np.clip(np.random.default_rng(0).normal(0.0, 0.3, 22050), -1.0, 1.0)
    voice = write_wav(tmp_path / "voice.wav", noise)
    first = ("--end", "0.3")
    flags = (
        *("--models-dir", str(pack), "--lip-syncer", "wav2lip_gan_96", "--lip-sync-audio", str(voice)),
        *("--voice-extractor", "none", *first),
    )

    plain = render(tmp_path / "plain", barred, *first)
    box = render(tmp_path / "box", barred, *flags, "--mask", "box")
    capsys.readouterr()
    masked = render(tmp_path / "occlusion", barred, *flags, "--mask", "box,occlusion")
    assert "occlusion" not in capsys.readouterr().err
    assert len(masked) == len(box) == len(plain) == 9

    # under the box mask the black mouth runs over the bar's top rows on every frame
    assert min(moved(box, plain, BAR)) > 100 and bar_moved(box, plain) > 3.0, moved(box, plain, BAR)
    # under the occlusion mask the bar stays as it was
    assert max(moved(masked, plain, BAR)) <= 2 and bar_moved(masked, plain) < 0.1, moved(masked, plain, BAR)
    # ... and the lips above it are still redrawn (darker), on every frame
    assert min(moved(masked, plain, MOUTH)) > 25, moved(masked, plain, MOUTH)
    lips_box, lips_masked = mean_moved(box, plain, MOUTH), mean_moved(masked, plain, MOUTH)
    assert lips_masked > 0.15 * lips_box > 0.5, (lips_masked, lips_box)
    pairs = zip(masked, plain, strict=True)
    darker = [float(p[MOUTH].astype(int).sum() - f[MOUTH].astype(int).sum()) for f, p in pairs]
    assert min(darker) > 0, darker
