"""`ffdesk faces` and the people pass on hostile input: times that are no point of the clip, a
range with no frame in it, image sequences as a render takes them, a still image with a range,
a models folder that is missing, a file, or holds another model under ArcFace's name, and an
ArcFace that takes one face a run behind a runner that does not say so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.people import ArcFaceFaces, ClipRange, find_people, recognizer_for
from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standin
from tests.faces import photos
from tests.faces.two_shot import HEIGHT, WIDTH, cut_clip, place


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ffdesk.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line_refusal(rc: int, out: str, err: str) -> str:
    assert rc == 2 and not out and "Traceback" not in err and err.strip().count("\n") == 0, (rc, out, err)
    return err


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six frames at 25 frames/s (0.24 s): the astronaut, then Grace Hopper."""
    return cut_clip(tmp_path_factory.mktemp("clip") / "cut.mp4", shot=2)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--end", "nan"], "cannot read time 'nan'"),  # was an internal error (NaN to integer)
        (["--start", "nan", "--end", "0.1"], "cannot read time 'nan'"),
        (["--end", "inf"], "cannot read time 'inf'"),  # was an internal error (OverflowError)
        (["--end", "0"], "--end 0s is not after --start 0s"),  # was "0 people in 0 frames"
        (["--start", "0.22"], "cut.mp4: no frames in the requested range"),  # after the last frame
        (["--fps", "10"], "--fps is the frame rate of an image sequence"),
    ],
)
def test_a_range_with_no_frame_is_one_line(
    clip: Path, argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _one_line_refusal(*_cli(["faces", str(clip), *argv], capsys))
    assert said in err


def test_an_image_sequence_is_looked_at_as_a_render_takes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A render takes a folder of numbered frames or a pattern (`--map` then names its people), so
    `ffdesk faces` must list them: it said "is a folder; give a clip" and "no such file"."""
    frames = tmp_path / "shots"
    frames.mkdir()
    for i in range(4):
        picture = place(photos.background(WIDTH, HEIGHT, 1), photos.astronaut(), 150 + i, 0, 320)
        cv2.imwrite(str(frames / f"frame_{i:04d}.png"), cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
    rc, out, _ = _cli(["faces", str(frames), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["frames_looked"] == 4 and [p["faces"] for p in doc["people"]] == [4]
    rc, out, _ = _cli(
        ["faces", str(frames / "frame_%04d.png"), "--fps", "10", "--start", "0.1", "--json"], capsys
    )
    doc = json.loads(out)
    assert rc == 0 and doc["people"][0]["frames"] == [1, 2, 3] and doc["people"][0]["first_s"] == 0.1
    empty = tmp_path / "empty"
    empty.mkdir()
    err = _one_line_refusal(*_cli(["faces", str(empty)], capsys))
    assert f"{empty} is a folder with no numbered frames" in err


def test_a_still_image_is_looked_at_whatever_the_range(analyser: FaceAnalyser, tmp_path: Path) -> None:
    """A render of an image ignores --start, so its --map must find the photo's people too: the
    pass said "0 people" and the render "--map 0: the clip has 0 people"."""
    photo = tmp_path / "photo.jpg"
    shutil.copy(resource_path("sample", "astronaut.jpg"), photo)
    found = find_people(photo, analyser=analyser, span=ClipRange(1.0, 2.0))
    assert found.frames_looked == 1 and len(found.people) == 1


def test_a_models_folder_that_is_missing_or_a_file_is_one_line(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both were taken for "no ArcFace there" without a word: the listing then used another
    recognizer than the user asked for."""
    err = _one_line_refusal(*_cli(["faces", str(clip), "--models-dir", str(tmp_path / "nowhere")], capsys))
    assert "--models-dir" in err and "no such folder" in err
    err = _one_line_refusal(*_cli(["faces", str(clip), "--models-dir", str(clip)], capsys))
    assert f"the models folder {clip} is a file, not a folder" in err
    with pytest.raises(UserError, match="is a file, not a folder"):
        recognizer_for(clip)


def test_another_model_under_arcfaces_name_is_refused_before_any_frame(tmp_path: Path) -> None:
    """A landmarker saved as arcface_w600k_r50.onnx (or arcface_simswap.onnx, which the catalog
    does not describe) ran into ONNX Runtime's "invalid dimensions" on the first face: an
    internal error with a traceback, from `ffdesk faces` and from `render --map`."""
    landmarker = load_catalog().get("2dfan4")
    write_standin(landmarker, tmp_path / "made")
    made = tmp_path / "made" / landmarker.file
    for name, said in (
        ("arcface_w600k_r50", r"arcface_w600k_r50.onnx: input 'input' is \[1,3,256,256\], expected"),
        ("arcface_simswap", r"arcface_simswap.onnx: not an ArcFace recognizer"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(made, folder / f"{name}.onnx")
        with pytest.raises(UserError, match=said) as info:
            recognizer_for(folder)
        assert "\n" not in str(info.value)
    good = tmp_path / "good"
    write_standin(load_catalog().get("arcface_w600k_r50"), good)
    assert recognizer_for(good).name == "arcface_w600k_r50"


class _Wrapped:
    """A runner that does not say whether it takes a batch (as a render's residency-managed
    model does), around a session that fixes its batch at 1 (as FaceFusion's files do)."""

    def __init__(self, session: Runner) -> None:
        self.session = session
        self.runs = 0

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.runs += 1
        return self.session.run(inputs)


def test_a_batch_one_arcface_behind_a_plain_runner_embeds_every_face(
    analyser: FaceAnalyser, tmp_path: Path
) -> None:
    """`render --swapper ... --map` fed all faces of a frame to the pack's ArcFace in one run:
    ONNX Runtime's "invalid dimensions (Got: 2 Expected: 1)", an internal error, on any frame
    with two people."""
    from ffdesk.runtime.sessions import OrtSession

    write_standin(load_catalog().get("arcface_w600k_r50"), tmp_path)
    session = OrtSession(tmp_path / "arcface_w600k_r50.onnx")
    assert session.fixed_batch == 1
    two = photos.side_by_side(photos.astronaut(), photos.grace_hopper())
    faces = analyser.analyse(two)
    assert len(faces) == 2
    runner = _Wrapped(session)
    vectors = ArcFaceFaces(runner).embed(two, faces)
    assert vectors.shape == (2, 512) and runner.runs == 2
    alone = ArcFaceFaces(session).embed(two, faces[1:])
    assert np.allclose(vectors[1], alone[0], atol=1e-5)


def test_a_saved_pack_with_an_arcface_is_named_when_faces_tells_people_apart_otherwise(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `ffdesk faces` (no --models-dir) numbers people with dlib or the appearance signature; a
    # --swapper render matches them with the saved pack's ArcFace, whose numbers can differ
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.files import save_models_dir

    pack = tmp_path / "pack"
    pack.mkdir()
    rc, _, err = _cli(["faces", str(clip)], capsys)
    assert rc == 0 and "note:" not in err  # no pack saved: nothing to say
    write_standin(load_catalog().get("arcface_w600k_r50"), pack)
    save_models_dir(pack, RuntimeEnv.from_system())
    rc, _, err = _cli(["faces", str(clip)], capsys)
    assert rc == 0
    assert f"by arcface_w600k_r50 in {pack.resolve()}: for its numbers, list them with --models-dir" in err
    rc, out, err = _cli(["faces", str(clip), "--models-dir", str(pack), "--json"], capsys)
    assert rc == 0 and "note:" not in err and json.loads(out)["recognizer"] == "arcface_w600k_r50"


def test_a_saved_models_folder_that_is_a_file_leaves_faces_working(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the note looks at the saved folder; a broken setting there is no reason to refuse the listing
    from ffdesk.runtime.env import RuntimeEnv, write_setting

    afile = tmp_path / "afile"
    afile.write_text("x")
    write_setting(RuntimeEnv.from_system().settings_path, "models_dir", str(afile))
    rc, out, err = _cli(["faces", str(clip)], capsys)
    assert rc == 0 and "people" in out.lower(), (out, err)
