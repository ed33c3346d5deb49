"""`ffdesk probe`'s plan says NVENC only where the front end's driver switches allow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.hw import DriverFlags
from ffdesk.media.inspect import inspect_clip
from ffdesk.media.synth import synth_clip


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (DriverFlags(), "h264_nvenc"),
        (DriverFlags(no_nvenc=True), "libx264"),
        (DriverFlags(no_nvml=True), "libx264"),
    ],
)
def test_the_plan_follows_the_driver_switches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: DriverFlags, expected: str
) -> None:
    import ffdesk.hw.nvidia as nvidia

    monkeypatch.setattr(nvidia, "driver_present", lambda: True)  # as on a machine with the driver
    monkeypatch.setenv("FFDESK_NO_NVENC", "1")  # the process environment must not decide
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=48, fps=12.0, frames=6)
    report = inspect_clip(clip, ".mp4", encoder="h264", driver=flags)
    video_plan = report.plans[0]
    assert expected in str(video_plan)
