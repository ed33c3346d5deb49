"""A render with the exported model as the swapper (`ffdesk render --swapper RUN_DIR/model.onnx`)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
import skimage.data

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.plan import build_stages
from ffdesk.pipeline.stages.trained import TrainedSwapStage, is_trained_swapper, read_contract


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "face.mp4"
    face = skimage.data.astronaut()[30:260, 130:320]
    synth_clip(path, width=256, height=192, fps=25, frames=6, face_image=face, crf=12)
    return path


def test_the_exported_model_is_recognised_by_its_contract(trained: Path, tmp_path: Path) -> None:
    assert is_trained_swapper(str(trained / "model.onnx"))
    assert is_trained_swapper(str(trained))  # the run folder works too
    (trained / "model.json").rename(tmp_path / "saved.json")
    try:  # without the sidecar the contract comes from the ONNX metadata
        contract = read_contract(trained / "model.onnx")
        assert contract is not None and contract["alignment"]["template"] == "arcface_128"
    finally:
        (tmp_path / "saved.json").rename(trained / "model.json")
    other = tmp_path / "other.onnx"
    other.write_bytes(b"not a model")
    assert not is_trained_swapper(str(other)) and not is_trained_swapper("inswapper_128")


def test_render_swaps_faces_with_the_trained_model(trained: Path, face_clip: Path, tmp_path: Path) -> None:
    job = RenderJob(
        target=face_clip, output=tmp_path / "out.mp4", swapper=str(trained / "model.onnx"), batch=4
    )
    stages = build_stages(job)  # no --source needed: the model knows whom to draw
    assert isinstance(stages[-1], TrainedSwapStage)
    stages[-1].finish()  # releases the model this check loaded
    report = run_render(job, lambda _e: None)
    assert report["faces_swapped"] == report["frames_with_faces"] == 6
    assert report["swapper_kind"] == "ffdesk-trained-swapper"
    before, after = _frames(face_clip), _frames(tmp_path / "out.mp4")
    assert len(after) == 6
    diff = np.abs(after[0].astype(int) - before[0].astype(int)).sum(axis=2)
    changed = diff > 40
    ys, xs = np.nonzero(changed)
    assert changed.mean() > 0.03  # the face was redrawn ...
    assert 40 < xs.mean() < 216 and 30 < ys.mean() < 162  # ... in the middle, where the face is
    assert not changed[:10, :].any()  # and nothing else (the bar code row stays)


def test_cli_render_with_a_run_folder_and_a_bad_model(trained: Path, face_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.mp4"
    assert (
        main(["render", "--target", str(face_clip), "--output", str(out), "--swapper", str(trained), "-q"])
        == 0
    )
    assert len(_frames(out)) == 6
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"junk")
    with pytest.raises(UserError):
        from ffdesk.pipeline.stages.trained import trained_stages

        trained_stages(RenderJob(target=face_clip, output=out, swapper=str(bogus)))
