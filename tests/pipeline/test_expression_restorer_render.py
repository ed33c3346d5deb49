"""The expression restorer in a render of a real clip (carphone) with LivePortrait stand-ins:
alone it restores each face from the same frame (a redraw of the face box and nothing else);
after a swap it redraws only the swapped faces' boxes; the frame as decoded is kept before the
swap and let go after the restorer; missing, damaged and wrong files are one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

PARTS = ("feature_extractor", "motion_extractor", "generator", "eye_retargeter", "lip_retargeter", "stitcher")
SOURCE = str(resource_path("sample", "astronaut.jpg"))


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("live_portrait_pack")
    write_standins(folder, [f"live_portrait_{p}" for p in PARTS])
    return folder


def render(out: Path, *extra: str) -> list[np.ndarray]:
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "render",
        "--target",
        str(carphone()),
        "--output",
        str(out / "f"),
        "--encoder",
        "png",
        "--end",
        "1",
    ]
    assert main([*args, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted((out / "f").glob("*.png"))]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def swapped(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("swapped"), "--source", SOURCE)


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def assert_face_box_only(frames: list[np.ndarray], before: list[np.ndarray]) -> list[np.ndarray]:
    """Every frame changed, within a box around the face (the top-left corner, the car's seat
    and the frame's bottom rows bit-identical); the change masks."""
    assert len(frames) == len(before) == 30
    masks = [changed(a, b) for a, b in zip(frames, before, strict=True)]
    assert all(m.any() for m in masks)
    for m in masks:
        ys, xs = np.nonzero(m)
        assert m.sum() < 0.25 * m.size
        assert (ys.max() - ys.min()) < 110 and (xs.max() - xs.min()) < 110
        assert not m[:, :20].any() and not m[130:].any()
    return masks


def test_alone_it_restores_each_face_from_its_own_frame(
    tmp_path: Path, pack: Path, plain: list[np.ndarray]
) -> None:
    """No swap: the original and the drawn face are the same, so the generator redraws each face
    with its own expression: the face box changes by resampling only, the rest not at all."""
    frames = render(tmp_path, "--models-dir", str(pack), "--expression-restorer", "live_portrait")
    masks = assert_face_box_only(frames, plain)
    for f, p, m in zip(frames, plain, masks, strict=True):
        assert np.abs(f.astype(int) - p.astype(int))[m].mean() < 4


def test_after_a_swap_only_the_swapped_face_is_redrawn(
    tmp_path: Path, pack: Path, swapped: list[np.ndarray]
) -> None:
    args = ["--source", SOURCE, "--models-dir", str(pack), "--expression-restorer", "live_portrait"]
    restored = render(tmp_path / "a", *args)
    assert_face_box_only(restored, swapped)
    # the factor matters: none at all differs from FaceFusion's 80 on some frames at least
    weaker = render(tmp_path / "b", *args, "--expression-restorer-factor", "0")
    assert any(changed(a, b).any() for a, b in zip(restored, weaker, strict=True))


def test_the_decoded_frame_is_kept_before_the_swap_and_let_go_after(pack: Path, run_env: RuntimeEnv) -> None:
    from ffdesk.pipeline.flow import run_through
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.plan import build_stages
    from ffdesk.pipeline.stage import FramePacket

    job = RenderJob(
        target=carphone(),
        output=Path("unused.mp4"),
        sources=(Path(SOURCE),),
        models_dir=pack,
        expression_restorer="live_portrait",
    )
    stages = build_stages(job, env=run_env)
    names = [s.name for s in stages]
    assert names.index("keep_target") + 1 == names.index("swap") < names.index("expression_restore")
    alone = build_stages(
        RenderJob(
            target=carphone(), output=Path("x.mp4"), models_dir=pack, expression_restorer="live_portrait"
        ),
        env=run_env,
    )
    alone_names = [s.name for s in alone]
    assert alone_names.index("keep_target") + 1 == alone_names.index("expression_restore")
    for stage in alone:
        stage.finish()
    import av

    with av.open(str(carphone())) as container:
        image = np.asarray(next(container.decode(video=0)).to_ndarray(format="rgb24"), np.uint8)
    packets = [FramePacket(index=0, pts=0, image=image.copy())]
    for stage in stages:
        stage.start()
    seen: list[bool] = []
    for stage in stages:
        packets = run_through([stage], packets)
        seen.append(packets[0].target_image is not None)
    for stage in stages:
        stage.finish()
    keep, restore = names.index("keep_target"), names.index("expression_restore")
    assert seen[keep] and seen[restore - 1] and not seen[restore]
    assert not np.array_equal(packets[0].image, image)


def test_bad_files_are_one_line(tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import write_sidecar
    from ffdesk.runtime.standins import write_standin

    def folder(name: str) -> Path:
        out = tmp_path / name
        shutil.copytree(pack, out)
        return out

    missing = folder("missing")
    (missing / "live_portrait_generator.onnx").unlink()
    truncated = folder("truncated")
    data = (truncated / "live_portrait_motion_extractor.onnx").read_bytes()
    (truncated / "live_portrait_motion_extractor.onnx").write_bytes(data[: len(data) // 2])
    wrong = folder("wrong")
    info = write_standin(load_catalog().get("xseg_1"), wrong)
    info.path.replace(wrong / "live_portrait_feature_extractor.onnx")
    write_sidecar(wrong / "live_portrait_feature_extractor.onnx")
    outputs = folder("outputs")  # the same input, one output instead of seven
    shutil.copy(
        pack / "live_portrait_feature_extractor.onnx", outputs / "live_portrait_motion_extractor.onnx"
    )
    write_sidecar(outputs / "live_portrait_motion_extractor.onnx")
    cases = [
        (missing, "live_portrait", "live_portrait_generator not found"),
        (truncated, "live_portrait", "live_portrait_motion_extractor.onnx: truncated or not an ONNX model"),
        (wrong, "live_portrait", "live_portrait_feature_extractor.onnx: input 'input' is [1,256,256,3]"),
        (outputs, "live_portrait", "live_portrait_motion_extractor.onnx: has 1 outputs, expected at least 7"),
        (pack, "live_portrait_v2", "unknown model set 'live_portrait_v2' (known: live_portrait)"),
    ]
    for i, (models, value, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        out.mkdir()
        args = ["render", "--target", str(carphone()), "--output", str(out / "f"), "--encoder", "png"]
        args += ["--no-resume", "-q", "--models-dir", str(models), "--expression-restorer", value]
        assert main(args) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and "Traceback" not in err, err
        assert len(err.splitlines()) == 1, err
        assert not any(out.rglob("*.png"))


def test_the_restorer_needs_only_its_three_files(tmp_path: Path, pack: Path, plain: list[np.ndarray]) -> None:
    import shutil

    three = tmp_path / "three"
    three.mkdir()
    for part in ("feature_extractor", "motion_extractor", "generator"):
        for suffix in (".onnx", ".hash"):
            shutil.copy(pack / f"live_portrait_{part}{suffix}", three)
    frames = render(tmp_path / "out", "--models-dir", str(three), "--expression-restorer", "live_portrait")
    assert_face_box_only(frames, plain)
