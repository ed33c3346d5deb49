"""The frame colorizer in a render: a black-and-white version of a real clip (carphone, made grey
here) coloured by the DDColor and DeOldify stand-ins through the command line, written as PNG so
every pixel can be checked against the frames as the render decodes them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.images import read_image
from ffdesk.pipeline.job import COLORIZER_SIZES, RenderJob
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.integrity import save_onnx_atomic, write_sidecar
from ffdesk.runtime.standins import build_standin, write_standins
from ffdesk.swap import frame_colorizer as fc
from tests.clip_writer import write_h264
from tests.real_clips import carphone

FRAMES = 24


def decode(path: Path, count: int = FRAMES) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for _, f in zip(range(count), c.decode(video=0), strict=False)]


@pytest.fixture(scope="module")
def grey_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first frames of carphone made grey (OpenCV's luma), as near-lossless H.264."""
    frames = [fc.grey(f) for f in decode(carphone())]
    return write_h264(tmp_path_factory.mktemp("bw") / "carphone_bw.mp4", frames, fps=25, crf=8)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("colour_pack")
    write_standins(folder, ["ddcolor", "deoldify"])
    return folder


def render(target: Path, out: Path, *extra: str) -> list[np.ndarray]:
    args = ["render", "--target", str(target), "--output", str(out), "--encoder", "png"]
    assert main([*args, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted(out.glob("*.png"))]


@pytest.fixture(scope="module")
def grey_frames(grey_clip: Path, tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """The grey clip's frames as a render without a processor decodes them."""
    return render(grey_clip, tmp_path_factory.mktemp("plain") / "frames")


def lab(image: np.ndarray) -> np.ndarray:
    """CIE Lab of an RGB image (L 0-100, a and b about -128..127), float32."""
    return np.asarray(cv2.cvtColor((image / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB))


def chroma(image: np.ndarray) -> float:
    values = lab(image)
    return float(np.hypot(values[..., 1], values[..., 2]).mean())


def blue_is_lightness(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether `after`'s 8-bit L code is `before`'s blue channel, within the rounding of an 8-bit
    Lab -> RGB -> Lab round trip (and a few pixels clipped to the RGB gamut)."""
    code = cv2.cvtColor(after, cv2.COLOR_RGB2LAB)[..., 0].astype(int)
    diff = np.abs(code - before[..., 2])
    return bool(np.percentile(diff, 99) <= 1 and diff.max() <= 4)


def test_ddcolor_colours_the_grey_clip_and_keeps_its_lightness(
    tmp_path: Path, grey_clip: Path, pack: Path, grey_frames: list[np.ndarray]
) -> None:
    frames = render(grey_clip, tmp_path / "dd", "--models-dir", str(pack), "--frame-colorizer")
    assert len(frames) == len(grey_frames) == FRAMES
    for before, after in zip(grey_frames, frames, strict=True):
        assert after.shape == before.shape == (144, 176, 3)
        assert chroma(before) < 0.5 and chroma(after) > 8.0
        dl = np.abs(lab(after)[..., 0] - lab(before)[..., 0])  # L in 0-100
        assert float(np.percentile(dl, 99)) < 0.5 and float(dl.max()) < 2.5 and float(dl.mean()) < 0.2
    middle = FRAMES // 2
    side = np.concatenate([grey_frames[middle], frames[middle]], axis=1)
    cv2.imwrite(str(tmp_path / "side_ddcolor.png"), side[..., ::-1])


def test_deoldify_takes_the_frames_blue_channel_as_its_lightness(
    tmp_path: Path, grey_clip: Path, pack: Path, grey_frames: list[np.ndarray]
) -> None:
    extra = ("--models-dir", str(pack), "--frame-colorizer", "deoldify", "--frame-colorizer-size", "512x512")
    frames = render(grey_clip, tmp_path / "old", *extra)
    assert len(frames) == FRAMES
    for before, after in zip(grey_frames, frames, strict=True):
        assert chroma(after) > 8.0
        assert blue_is_lightness(before, after)


def test_blend_0_gives_the_frames_back_and_50_half_the_colour(
    tmp_path: Path,
    grey_clip: Path,
    pack: Path,
    grey_frames: list[np.ndarray],
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    zero = render(
        grey_clip,
        tmp_path / "b0",
        "--models-dir",
        str(pack),
        "--frame-colorizer",
        "--frame-colorizer-blend",
        "0",
    )
    assert all(np.array_equal(a, b) for a, b in zip(zero, grey_frames, strict=True))
    said = capsys.readouterr()  # it said "frame_colorize (ddcolor): 0 faces", and nothing else
    assert "--frame-colorizer-blend 0 keeps each frame's own colours: ddcolor does not run" in said.err
    assert "frame_colorize (ddcolor): 0 frames" in said.out
    full = render(grey_clip, tmp_path / "b100", "--models-dir", str(pack), "--frame-colorizer")
    half = render(
        grey_clip,
        tmp_path / "b50",
        "--models-dir",
        str(pack),
        "--frame-colorizer",
        "--frame-colorizer-blend",
        "50",
    )
    for g, h, f in zip(grey_frames, half, full, strict=True):
        expected = cv2.addWeighted(g, 0.5, f, 0.5, 0)
        assert np.abs(h.astype(int) - expected).max() <= 1
        assert 0.35 < chroma(h) / chroma(f) < 0.65


def test_a_colour_clip_keeps_its_lightness_and_takes_the_models_colours(
    tmp_path: Path, pack: Path, run_env
) -> None:  # type: ignore[no-untyped-def]
    """The real carphone, in colour: fed grey like any other, its own colours are replaced."""
    from ffdesk.pipeline.stages.frame_colorizer import frame_colorizer_stage

    frames = decode(carphone(), 4)
    job = RenderJob(target=carphone(), output=tmp_path / "o.mp4", models_dir=pack, frame_colorizer="ddcolor")
    stage = frame_colorizer_stage(job, env=run_env)
    try:
        coloured = stage.colorize(frames)
        from_grey = stage.colorize([fc.grey(f) for f in frames])
    finally:
        stage.finish()
    for src, out, out_grey in zip(frames, coloured, from_grey, strict=True):
        assert np.abs(lab(out)[..., 0] - lab(src)[..., 0]).mean() < 0.2
        # the same model input: the same colour (a and b) as from the grey version
        assert np.abs(lab(out)[..., 1:] - lab(out_grey)[..., 1:]).mean() < 2.0
        assert np.abs(lab(out)[..., 1:] - lab(src)[..., 1:]).mean() > 3.0


def fixed_standin(folder: Path, name: str, side: int) -> None:
    """A stand-in of `name` whose input and output sides are fixed to `side` (as an export may
    have them): ONNX Runtime refuses any other size."""
    spec = load_catalog().get(name)
    x, y = spec.inputs[0], spec.outputs[0]
    fixed = replace(
        spec,
        inputs=(replace(x, shape=(1, 3, side, side)),),
        outputs=(replace(y, shape=(1, y.shape[1], side, side)),),
    )
    folder.mkdir(parents=True, exist_ok=True)
    save_onnx_atomic(build_standin(fixed), folder / spec.file)
    write_sidecar(folder / spec.file)


@pytest.mark.parametrize("size", COLORIZER_SIZES)
def test_every_size_option_feeds_the_model_at_that_size(
    tmp_path: Path, grey_clip: Path, size: str, run_env
) -> None:  # type: ignore[no-untyped-def]
    """Each size runs a file fixed to that size (ONNX Runtime checks what it is fed); another
    size is refused in one line before any frame."""
    from ffdesk.pipeline.stages.frame_colorizer import frame_colorizer_stage

    side = fc.model_size(size)[0]
    folder = tmp_path / "fixed"
    fixed_standin(folder, "ddcolor", side)
    frame = fc.grey(decode(grey_clip, 1)[0])
    common = {
        "target": grey_clip,
        "output": tmp_path / "o.mp4",
        "models_dir": folder,
        "frame_colorizer": "ddcolor",
    }
    stage = frame_colorizer_stage(RenderJob(frame_colorizer_size=size, **common), env=run_env)  # type: ignore[arg-type]
    try:
        (out,) = stage.colorize([frame])
    finally:
        stage.finish()
    assert out.shape == frame.shape and chroma(out) > 8.0
    other = next(s for s in COLORIZER_SIZES if s != size)
    with pytest.raises(UserError) as err:
        frame_colorizer_stage(RenderJob(frame_colorizer_size=other, **common), env=run_env)  # type: ignore[arg-type]
    assert f"ddcolor.onnx: input is fixed to {side}x{side} px; --frame-colorizer-size {other}" in str(
        err.value
    )
    assert "\n" not in str(err.value)


def test_bad_model_files_are_one_line_errors(
    tmp_path: Path, grey_clip: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file, a truncated one, and a deoldify file under DDColor's name (the command run
    in this process: the one line and the exit status are `main`'s, as `python -m ffdesk` gives
    them back)."""
    folder = tmp_path / "bad"
    folder.mkdir()
    data = (pack / "deoldify.onnx").read_bytes()
    (folder / "ddcolor.onnx").write_bytes(data)
    (folder / "deoldify.onnx").write_bytes(data[: len(data) // 3])
    cases = {
        "ddcolor": "ddcolor.onnx: output 0 ('output') is [1,3,H,W], expected [1,2,H,W]",
        "deoldify": "deoldify.onnx: truncated or not an ONNX model",
        "ddcolor_artistic": "model ddcolor_artistic not found",
    }
    for model, says in cases.items():
        out = tmp_path / f"{model}.mp4"
        cmd = ["render", "--target", str(grey_clip), "--output", str(out), "--models-dir", str(folder)]
        capsys.readouterr()
        code = main([*cmd, "--frame-colorizer", model])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and says in err, err
        assert not out.exists()


def _colour_then_upscale(tmp_path: Path, grey_clip: Path, pack: Path, budget: int | None = None) -> RenderJob:
    """A job with the colorizer and a x2 frame enhancer (their stand-ins in `tmp_path`), no swap."""
    write_standins(tmp_path, ["real_esrgan_x2"])
    for name in ("ddcolor.onnx", "ddcolor.hash"):
        (tmp_path / name).write_bytes((pack / name).read_bytes())
    return RenderJob(
        target=grey_clip,
        output=tmp_path / "o.mp4",
        models_dir=tmp_path,
        frame_colorizer="ddcolor",
        frame_enhancer="real_esrgan_x2",
        memory_budget=budget,
    )


def test_the_colorizer_runs_after_the_face_stages_and_before_the_frame_enhancer(
    tmp_path: Path, grey_clip: Path, pack: Path, run_env
) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.pipeline.plan import build_stages

    stages = build_stages(_colour_then_upscale(tmp_path, grey_clip, pack), env=run_env)
    try:
        assert [s.name for s in stages] == ["frame_colorize", "frame_enhance"]
        assert stages[0].edits_regions is False
    finally:
        for stage in stages:
            stage.finish()


def test_processors_without_a_swap_share_one_budget(
    tmp_path: Path, grey_clip: Path, pack: Path, run_env
) -> None:  # type: ignore[no-untyped-def]
    """Without model stages, the render's processors run their models under one manager (the
    first's), so `--memory-budget` holds them all together, not each on its own; it is let go
    once, with the first."""
    from ffdesk.pipeline.plan import build_stages

    stages = build_stages(_colour_then_upscale(tmp_path, grey_clip, pack, 64 << 20), env=run_env)
    colorize, enhance = stages
    try:
        manager = colorize.models.manager  # type: ignore[attr-defined]
        assert enhance.models.manager is manager and manager.budget_bytes == 64 << 20  # type: ignore[attr-defined]
        assert {k.split("@")[0] for k in manager.registered()} == {"ddcolor", "real_esrgan_x2"}
    finally:
        for stage in stages:
            stage.finish()
    assert manager.resident() == ()


def test_a_model_file_with_a_description_runs_by_its_path(
    tmp_path: Path, grey_clip: Path, pack: Path, grey_frames: list[np.ndarray]
) -> None:
    """A colorizer the catalog does not know, described beside it without a type (its three
    output channels make it a DeOldify)."""
    mine = tmp_path / "my_colorizer.onnx"
    mine.write_bytes((pack / "deoldify.onnx").read_bytes())
    mine.with_suffix(".toml").write_text(
        '[[model]]\nkind = "frame_colorizer"\n'
        'inputs = [{ name = "input", shape = [1, 3, "H", "W"], layout = "NCHW" }]\n'
        'outputs = [{ name = "", shape = [1, 3, "H", "W"], layout = "NCHW" }]\n',
        encoding="utf-8",
    )
    frames = render(grey_clip, tmp_path / "mine", "--frame-colorizer", str(mine), "--end", "0.2")
    assert 0 < len(frames) < FRAMES
    for before, after in zip(grey_frames, frames, strict=False):
        assert chroma(after) > 8.0 and blue_is_lightness(before, after)
