"""`ffdesk bench io --target FILE`: a real clip timed against the ffmpeg command line doing the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.bench.io import ffmpeg_command
from ffdesk.media import inspect as inspect_mod
from ffdesk.media.inspect import inspect_clip
from ffdesk.media.synth import draw_frame, synth_clip
from tests.media.test_inspect import avi_with_bframes

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="the ffmpeg command line is not installed"
)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bench-io")
    return {
        "mp4": synth_clip(folder / "tiny.mp4", width=160, height=96, frames=12, audio_streams=2).path,
        "avi": avi_with_bframes(folder / "b.avi", frames=12),
    }


def test_ffmpeg_gets_the_renders_job(clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inspect_mod, "video_encoder_name", lambda enc, driver=None: "libx264")
    out = Path("out.mp4")
    cmd = ffmpeg_command("ffmpeg", inspect_clip(clips["mp4"]), out)
    text = " ".join(cmd)
    assert "-map 0:0 -map 0:1 -map 0:2" in text
    assert "-c:v libx264 -preset medium -crf 18 -pix_fmt yuv420p" in text
    assert "-c:a:0 copy -c:a:1 copy" in text  # AAC goes into MP4 as it is
    assert cmd[-1] == "out.mp4"
    avi = " ".join(ffmpeg_command("ffmpeg", inspect_clip(clips["avi"]), out))
    assert "-map 0:0 -map 0:1" in avi and "-c:a:0 aac" in avi  # PCM is re-encoded, as the render does


@needs_ffmpeg
@pytest.mark.parametrize("name", ["mp4", "avi"])
def test_a_real_file_is_timed_against_ffmpeg(
    clips: dict[str, Path], name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "io.json"
    assert cli.main(["bench", "io", "--target", str(clips[name]), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert f"target {clips[name].name}:" in out
    assert "ffmpeg " in out and "ffdesk " in out and "ratio " in out
    rec = json.loads(report.read_text())
    assert rec["bench"] == "io" and rec["settings"]["target"] == str(clips[name])
    figures = rec["figures"]
    assert figures["frames"] == 12
    assert figures["ffmpeg_s"] > 0 and figures["ffdesk_s"] > 0
    assert figures["ratio"] == pytest.approx(figures["ffdesk_s"] / figures["ffmpeg_s"], rel=0.01)
    assert rec["settings"]["audio"] == (["copy", "copy"] if name == "mp4" else ["reencode"])


@needs_ffmpeg
def test_a_bad_target_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "io", "--target", str(tmp_path / "missing.mp4")]) == 2
    assert "file not found" in capsys.readouterr().err
    import cv2

    still = tmp_path / "still.png"
    cv2.imwrite(str(still), draw_frame(0, 64, 48))
    assert cli.main(["bench", "io", "--target", str(still)]) == 2
    assert "needs a clip, not an image" in capsys.readouterr().err
