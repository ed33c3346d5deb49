"""`faceset extract` over a folder holding a damaged file skips that file and extracts the rest;
an extraction that fails as a whole leaves no folder at `--out`.

A truncated JPEG among good photos was the whole command's error (exit 2), and the `--out` folder
it had made stayed behind, empty: `faceset info` then called it "not a faceset"."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import cv2
import pytest

from ffdesk.cli import main
from ffdesk.runtime.resources import resource_path
from ffdesk.training.faceset import ExtractSettings, extract

PHOTO = resource_path("sample", "grace_hopper.jpg")


def _photos(folder: Path, *, good: bool = True) -> Path:
    """a.jpg and b.png (the photo mirrored: another face to keep) and z.jpg, a.jpg cut short."""
    folder.mkdir()
    data = PHOTO.read_bytes()
    if good:
        shutil.copy(PHOTO, folder / "a.jpg")
        image = cv2.imread(str(PHOTO))
        assert image is not None
        assert cv2.imwrite(str(folder / "b.png"), image[:, ::-1])
    (folder / "z.jpg").write_bytes(data[:3000])
    return folder


def test_a_damaged_photo_is_skipped_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    photos = _photos(tmp_path / "c2")
    out = tmp_path / "fc2"
    assert main(["faceset", "extract", "--from", str(photos), "--out", str(out), "-q", "--size", "64"]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"ffdesk: warning: {photos / 'z.jpg'}: "), warnings
    assert warnings[0].endswith("; skipped")
    assert "2 faces kept from 2 frames of 3 inputs" in captured.out
    assert "skipped 1 damaged input" in captured.out
    assert main(["faceset", "info", str(out)]) == 0
    assert f"{out}: 2 faces" in capsys.readouterr().out


def test_nothing_readable_is_one_error_and_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    photos = _photos(tmp_path / "c3", good=False)
    out = tmp_path / "fc3"
    assert main(["faceset", "extract", "--from", str(photos), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "ffdesk: error: nothing extracted: could not read the input (damaged or unsupported)"
    assert not out.exists()


class _Failing:
    """A face finder that fails at the first image."""

    def detect(self, image: Any) -> list[Any]:
        raise RuntimeError("the detector broke")

    def landmarks(self, image: Any, face: Any) -> Any:
        raise AssertionError("not reached")


def test_a_failed_extraction_leaves_no_folder_it_made(tmp_path: Path) -> None:
    photos = _photos(tmp_path / "c4")
    out = tmp_path / "new" / "fc4"
    with pytest.raises(RuntimeError, match="the detector broke"):
        extract([photos], out, ExtractSettings(size=64), finder=_Failing())
    assert not out.exists()
    kept = tmp_path / "there"
    kept.mkdir()  # a folder the user made is theirs: left as it was
    with pytest.raises(RuntimeError):
        extract([photos], kept, ExtractSettings(size=64), finder=_Failing())
    assert kept.is_dir()


def test_a_clip_cut_off_half_way_is_said_as_a_render_says_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clip whose copy stopped half way decodes without an error up to the cut: the command
    says it is cut short (the faces of the rest are missing), as `render` does, and extracts
    what is there."""
    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip

    whole = tmp_path / "whole.mp4"  # index first, as a phone or a web export writes it
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(whole, width=240, height=136, fps=25, frames=24, face_image=face, faststart=True)
    data = whole.read_bytes()
    half = tmp_path / "half.mp4"
    half.write_bytes(data[: len(data) // 2])
    out = tmp_path / "fs"
    from ffdesk.media import probe as probe_module

    probed: list[Path] = []
    real_probe = probe_module.probe

    def counted(path: Path, **kwargs: Any) -> Any:
        probed.append(Path(path))
        return real_probe(path, **kwargs)

    monkeypatch.setattr(probe_module, "probe", counted)
    argv = ["faceset", "extract", "--from", str(half), "--out", str(out), "--size", "64", "--min-face", "0"]
    assert main(argv) == 0
    assert probed.count(half.resolve()) == 1  # the progress bar's count and the warning: one probe
    captured = capsys.readouterr()
    warnings = captured.err.strip().splitlines()
    assert len(warnings) == 1 and "half.mp4: truncated file (" in warnings[0], warnings
    assert warnings[0].endswith("extracting the frames that are there"), warnings
    assert " kept from " in captured.out and not captured.out.startswith("0 faces")
