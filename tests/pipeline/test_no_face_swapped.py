"""A render that swaps faces but swapped none says so in one warning: its exit status is 0 and its
output is the clip re-encoded, which a user took for a swap that worked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.commands.render import no_face_swapped
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.report import FaceCounts, RenderReport, VideoFigures
from tests.real_clips import carphone

SOURCE = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"


def test_a_clip_without_a_face_is_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = tmp_path / "bars.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=12)
    out = tmp_path / "out.mp4"
    assert main(["render", "-t", str(clip), "-s", str(SOURCE), "-o", str(out), "-q"]) == 0
    assert out.is_file()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["ffdesk: warning: no face was found in the 12 frames rendered: nothing was swapped"]


def test_a_swap_that_works_says_nothing_of_the_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.mp4"
    argv = ["render", "-t", str(carphone()), "-s", str(SOURCE), "-o", str(out), "--end", "0.3", "-q"]
    assert main(argv) == 0
    assert "nothing was swapped" not in capsys.readouterr().err


def _report(faces: FaceCounts | None, rendered: int) -> RenderReport:
    return RenderReport(
        frames_in=rendered, frames_out=rendered, frames_processed=rendered, stages=(), output=Path("o.mp4"),
        faces=faces,
    )  # fmt: skip


def test_faces_found_but_none_chosen_names_why() -> None:
    faces = FaceCounts.of(5, 0, {"not the reference face": 7})
    assert no_face_swapped(_report(faces, 9)) == (
        "faces were found in 5 of the 9 frames rendered, but none was swapped (not the reference face: 7)"
    )
    assert no_face_swapped(_report(FaceCounts.of(0, 0, {}), 1)) == (
        "no face was found in the 1 frame rendered: nothing was swapped"
    )
    assert no_face_swapped(_report(FaceCounts.of(3, 2, {}), 9)) is None  # some were swapped
    assert no_face_swapped(_report(None, 9)) is None  # no swap in this render
    assert no_face_swapped(_report(FaceCounts.of(0, 0, {}), 0)) is None  # everything resumed
    # a resumed render's figures are this run's: said so, not read as the whole output's
    resumed = replace(_report(FaceCounts.of(0, 0, {}), 10), video=VideoFigures("libx264", "final", 110))
    assert no_face_swapped(resumed) == (
        "no face was found in the 10 frames rendered now (110 resumed): nothing was swapped"
    )
