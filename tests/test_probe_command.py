"""`ffdesk probe CLIP [--json]`: the table, the JSON and the one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.media.synth import synth_clip
from ffdesk.runtime.resources import resource_path
from tests.media.test_inspect import avi_with_bframes

PHOTO = resource_path("sample", "grace_hopper.jpg")


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("probe-clips")
    return {
        "mp4": synth_clip(folder / "plain.mp4", width=160, height=96, frames=10, audio_streams=1).path,
        "avi": avi_with_bframes(folder / "b.avi", packed=True),
    }


def test_the_table_lists_streams_plans_and_warnings(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["probe", str(clips["avi"])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    labels = {line.split("  ")[0] for line in lines if line and not line.startswith(" ")}
    assert {"file", "container", "video #0", "picture", "frames", "timestamps", "audio #1"} <= labels
    # aligned: every row's text starts in the same column
    rows = [line for line in lines if line[:1].isalpha() and "  " in line]
    columns = {len(line) - len(line[line.index("  ") :].lstrip()) for line in rows}
    assert len(columns) == 1, rows
    assert "render to .mp4 with h264:" in out
    assert "re-encode -> aac" in out and "pcm_s16le cannot go into .mp4" in out
    assert "packed B-frames" in out
    assert "  ! packed MPEG-4 B-frames" in out


def test_json_is_the_report(clips: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["probe", str(clips["avi"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == str(clips["avi"]) and data["container"] == "avi"
    v = data["video"]
    assert v["codec"] == "mpeg4" and v["packed_bframes"] is True
    assert v["display_aspect_ratio"] == "5:3" and v["sample_aspect_ratio"] is None
    assert v["timestamps"]["packets_without_pts"] > 0
    assert isinstance(v["timestamps"]["needs_repair"], bool)
    assert data["audio"][0]["codec"] == "pcm_s16le" and data["audio"][0]["layout"] is None
    assert [(p["kind"], p["action"]) for p in data["plans"]] == [("video", "reencode"), ("audio", "reencode")]
    assert any(w.startswith("audio #1:") for w in data["warnings"])


def test_the_encoder_and_output_choose_the_plan(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["probe", str(clips["avi"]), "--json", "--output", "out.mov", "--encoder", "prores"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output_suffix"] == ".mov" and data["encoder"] == "prores"
    assert data["plans"][1]["action"] == "copy"
    # a file type the render would refuse is refused here too, not planned for
    assert cli.main(["probe", str(clips["avi"]), "--output", "out.txt"]) == 2
    err = capsys.readouterr().err
    assert "--output out.txt: --encoder h264 cannot be written to a '.txt' file; use .mp4" in err
    # as render refuses them: PNG frames into a clip's file, a clip's file for an image, --fps
    assert cli.main(["probe", str(clips["avi"]), "--encoder", "png", "--output", "x.mp4"]) == 2
    err = capsys.readouterr().err
    assert "--output x.mp4: --encoder png writes a folder of frames and cannot be written to a '.mp4'" in err
    assert cli.main(["probe", str(PHOTO), "--output", "x.mp4"]) == 2
    assert "--output x.mp4: an image target needs an image output" in capsys.readouterr().err
    assert cli.main(["probe", str(clips["avi"]), "--fps", "30"]) == 2
    assert "--fps is the frame rate of an image sequence" in capsys.readouterr().err


def test_a_plain_clip_has_nothing_to_watch(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["probe", str(clips["mp4"])]) == 0
    out = capsys.readouterr().out
    assert "copy -> aac" in out and "nothing to watch out for" in out


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ffdesk", *args], capture_output=True, text=True)


def test_the_command_line_runs(clips: dict[str, Path]) -> None:
    proc = _run("probe", str(clips["mp4"]), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["video"]["frame_count"] == 10


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("missing.mp4", None, "file not found"),
        ("notes.mp4", b"hello, not a video\n" * 50, "not a readable video"),
        ("empty.avi", b"", "empty file"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    tmp_path: Path, name: str, content: bytes | None, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """In this process: `main`'s exit status and lines are what `python -m ffdesk` gives back
    (`test_the_command_line_runs` runs the real command)."""
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code = cli.main(["probe", str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_exit_2(
    tmp_path: Path, clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "locked.mp4"
    path.write_bytes(clips["mp4"].read_bytes())
    path.chmod(0)
    try:
        code = cli.main(["probe", str(path)])
    finally:
        path.chmod(0o644)
    assert code == 2 and "not readable" in capsys.readouterr().err


def test_usage_errors_are_exit_2() -> None:
    assert cli.main(["probe"]) == 2
    assert cli.main(["probe", "x.mp4", "--encoder", "vp9"]) == 2


def test_a_reader_that_stops_early_is_not_an_error(clips: dict[str, Path]) -> None:
    """`ffdesk probe CLIP | head -1`: the pipe closes under the table; no internal error."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ffdesk", "probe", str(clips["avi"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the table is written, as `head` is after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 141)
    assert "internal error" not in err and "Traceback" not in err, err


def test_a_photo_is_described_as_rendering_to_a_photo(capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.runtime.resources import resource_path

    photo = str(resource_path("sample", "astronaut.jpg"))
    assert cli.main(["probe", photo]) == 0
    out = capsys.readouterr().out
    assert "render to .jpg:" in out and "h264" not in out  # a photo's own type, not a video encoder
    assert cli.main(["probe", photo, "--output", "swapped.png"]) == 0
    assert "render to .png:" in capsys.readouterr().out


def test_an_image_sequence_is_described_as_rendering_to_a_video(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    from PIL import Image

    for i in range(1, 4):
        Image.fromarray(np.full((48, 64, 3), 40 * i, np.uint8)).save(tmp_path / f"frame_{i:06d}.png")
    assert cli.main(["probe", str(tmp_path / "frame_%06d.png")]) == 0
    assert "render to .mp4 with h264:" in capsys.readouterr().out  # not to one .png
