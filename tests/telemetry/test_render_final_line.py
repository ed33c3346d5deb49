"""The line a render ends with (`finished_line`): a resumed render's frames/s counts only the
frames rendered by this run, so the line says how many those are and how many were resumed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ffdesk.commands.progress import finished_line
from ffdesk.pipeline.report import RenderReport, ShotFigures, UpscaleFigures, VideoFigures

OUT = Path("/clips/out.mp4")


def _report(frames_out: int, resumed: int, seconds: float) -> RenderReport:
    video = VideoFigures(encoder="libx264", mode="final", resumed_frames=resumed)
    report = RenderReport(
        frames_in=frames_out, frames_out=frames_out, frames_processed=frames_out - resumed,
        stages=(), output=OUT, video=video,
    )  # fmt: skip
    return report.timed(seconds, None)


def test_a_render_from_the_start_says_its_frames_and_rate() -> None:
    assert finished_line(_report(120, 0, 20.0)) == f"wrote {OUT} (120 frames, 6.0 frames/s)"


def test_a_resumed_render_says_which_frames_its_rate_counts() -> None:
    """113 frames rendered now in 17.08 s: 6.6 frames/s, which "120 frames, 6.6 frames/s" read
    as the whole output's rate."""
    report = _report(120, 7, 17.08)
    assert report.fps == round(113 / 17.08, 3)
    line = finished_line(report)
    assert line == f"wrote {OUT} (120 frames, 7 resumed and 113 rendered now at 6.6 frames/s)"


def test_a_render_all_resumed_has_no_rate_of_its_own() -> None:
    assert finished_line(_report(120, 120, 0.5)) == f"wrote {OUT} (120 frames, all resumed from before)"


def test_the_upscaled_size_shots_and_an_image_as_before() -> None:
    up = UpscaleFigures(model="real_esrgan_x4", scale=4, blend=80, width=1280, height=720)
    report = replace(_report(120, 7, 17.08), upscale=up, shots=ShotFigures(cuts=(40, 80)))
    assert finished_line(report) == (
        f"wrote {OUT} (120 frames, 1280x720 (x4 by real_esrgan_x4), 7 resumed and 113 rendered now"
        " at 6.6 frames/s, 3 shots)"
    )
    image = replace(_report(1, 0, 0.25), video=None, output=Path("/stills/out.png"))
    assert finished_line(image) == "wrote /stills/out.png (an image, 0.25 s)"
