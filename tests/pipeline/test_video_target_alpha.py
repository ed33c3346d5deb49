"""A video target with an alpha channel (keyed footage or a graphic: ProRes 4444, QuickTime PNG,
a sequence of RGBA PNGs) keeps it, frame by frame, in an output that can hold one (`--encoder
prores`, `--encoder png`); with `--matte alpha` the output's alpha is the product of the swap's
matte and the target's, with `--matte clip` the output keeps the target's and the matte goes
beside it. H.264 says in one line which encoders keep it and renders as before; a fully opaque
alpha changes nothing but the alpha plane (255). The alpha is resized with the picture.

The face is the astronaut's (the embedded swap puts Grace Hopper's on it) on a disc with a soft
edge, transparent outside; a quarter-transparent stripe crosses the face and moves with each
frame, so each frame's alpha is its own and the product differs from the matte alone.

ProRes tolerance: ffdesk writes the 8-bit alpha as 10 bits (yuva444p10le), FFmpeg's decoder reads
it back as 12 bits (yuva444p12le) and swscale scales that to 8 bits: at most 1 level off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import av
import cv2
import numpy as np
import numpy.typing as npt
import pytest

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import MatteKind, RenderJob
from ffdesk.pipeline.matte import matte_clip_path
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.types import EncoderName, Frame
from tests.faces.photos import astronaut, background

Alpha = npt.NDArray[np.uint8]
SOURCE = Path(resource_path("sample", "grace_hopper.jpg"))
SIZE = 256
FRAMES = 3
PRORES_LEVELS = 1
"""How far ProRes's 10-bit alpha, read back as 12 bits and scaled to 8, may be from the 8-bit one."""
KEPT_BY = "--encoder prores or png keeps the transparency; h264 and h265 drop it"


def _picture() -> Frame:
    """The astronaut's head and shoulders, SIZE x SIZE."""
    crop = astronaut()[0:320, 64:384]
    return np.ascontiguousarray(cv2.resize(crop, (SIZE, SIZE), interpolation=cv2.INTER_AREA))


def _alpha(index: int, width: int = SIZE, height: int = SIZE) -> Alpha:
    """A disc with a 20-pixel soft edge, transparent outside, and a stripe at a quarter of it
    across the face that moves 8 pixels a frame."""
    y, x = np.mgrid[0:height, 0:width]
    radius = np.hypot(x - width / 2, y - height / 2)
    alpha = np.clip((0.48 * min(width, height) - radius) / 20, 0, 1) * 255
    alpha[:, 100 + 8 * index : 112 + 8 * index] *= 0.25
    return np.rint(alpha).astype(np.uint8)


def _opaque(index: int, width: int = SIZE, height: int = SIZE) -> Alpha:
    return np.full((height, width), 255, np.uint8)


def _clip(path: Path, codec: str, pix_fmt: str, picture: Frame, alphas: list[Alpha]) -> Path:
    """A .mov of `picture` with each of `alphas` in turn (ProRes 4444 as prores_ks writes it from
    an editor's RGBA, or QuickTime PNG)."""
    options: dict[str, object] = {"profile": "4", "vendor": "apl0"} if codec == "prores_ks" else {}
    height, width = picture.shape[:2]
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream(codec, rate=25))
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = options
        for index, alpha in enumerate(alphas):
            layout = "rgba" if pix_fmt != "rgb24" else "rgb24"
            pixels = np.dstack((picture, alpha)) if layout == "rgba" else picture
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels), format=layout)
            frame = frame.reformat(format=pix_fmt)
            frame.pts = index
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _sequence(folder: Path, picture: Frame, alphas: list[Alpha]) -> Path:
    """RGBA PNG frames, as compositing apps render a graphic; the pattern that names them."""
    folder.mkdir()
    for index, alpha in enumerate(alphas):
        cv2.imwrite(
            str(folder / f"title_{index:03d}.png"),
            cv2.cvtColor(np.dstack((picture, alpha)), cv2.COLOR_RGBA2BGRA),
        )
    return folder / "title_%03d.png"


def _target(kind: str, folder: Path, alpha: Callable[[int], Alpha] = _alpha) -> Path:
    alphas = [alpha(i) for i in range(FRAMES)]
    picture = _picture()
    if kind == "prores4444":
        return _clip(folder / "keyed.mov", "prores_ks", "yuva444p10le", picture, alphas)
    if kind == "qtpng":
        return _clip(folder / "graphic.mov", "png", "rgba", picture, alphas)
    return _sequence(folder / "frames", picture, alphas)


def _imread(path: Path) -> npt.NDArray[np.uint8]:
    """An image file as OpenCV reads it (BGR, BGRA or grey, as stored); fails the test when unreadable."""
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert image is not None, path
    return np.asarray(image, np.uint8)


def _rgba(path: Path) -> list[npt.NDArray[np.uint8]]:
    """The frames of a clip, a folder of PNG frames or an image sequence as RGBA, as decoded;
    fails the test where they have no alpha channel (rather than making one up, opaque)."""
    if path.is_dir():
        frames = [_imread(f) for f in sorted(path.glob("*.png"))]
        assert all(f.ndim == 3 and f.shape[2] == 4 for f in frames), "no alpha"
        return [np.asarray(cv2.cvtColor(f, cv2.COLOR_BGRA2RGBA), np.uint8) for f in frames]
    with av.open(str(path)) as c:
        pix_fmt = c.streams.video[0].codec_context.pix_fmt or ""
        assert any(x.is_alpha for x in av.VideoFormat(pix_fmt).components), f"no alpha: {pix_fmt}"
        return [np.asarray(f.to_ndarray(format="rgba"), np.uint8) for f in c.decode(video=0)]


def _target_frames(target: Path) -> list[npt.NDArray[np.uint8]]:
    if "%" in target.name:
        return _rgba(target.parent)
    return _rgba(target)


def _render(
    target: Path,
    output: Path,
    env: RuntimeEnv,
    encoder: EncoderName,
    matte: MatteKind = "none",
    sources: tuple[Path, ...] = (SOURCE,),
    **extra: object,
) -> list[str]:
    """Render with the embedded swap (no source photo: no stage, the frames pass through); the
    render's warnings."""
    warnings: list[str] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Warning):
            warnings.append(event.message)

    job = RenderJob(
        sources=sources, target=target, output=output, encoder=encoder, matte=matte, resume=False,
        **extra,  # type: ignore[arg-type]
    )  # fmt: skip
    run_render(job, on_event, env=env)
    return warnings


def _output(tmp_path: Path, encoder: EncoderName, name: str = "out") -> Path:
    return tmp_path / (f"{name}.mov" if encoder == "prores" else name)


def _levels(encoder: EncoderName) -> int:
    return PRORES_LEVELS if encoder == "prores" else 0


def _assert_alpha(got: Alpha, want: Alpha, levels: int) -> None:
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= levels, (diff.max(), int((diff > levels).sum()))


@pytest.mark.parametrize("kind", ["prores4444", "qtpng", "sequence"])
@pytest.mark.parametrize("encoder", ["prores", "png"])
def test_the_output_keeps_the_targets_alpha_frame_by_frame(
    tmp_path: Path, run_env: RuntimeEnv, kind: str, encoder: EncoderName
) -> None:
    target = _target(kind, tmp_path)
    out = _output(tmp_path, encoder)
    warnings = _render(target, out, run_env, encoder)
    assert not [w for w in warnings if "alpha channel" in w], warnings
    source, rendered = _target_frames(target), _rgba(out)
    assert len(rendered) == len(source) == FRAMES
    for i, (before, after) in enumerate(zip(source, rendered, strict=True)):
        _assert_alpha(after[..., 3], _alpha(i), _levels(encoder))  # the alpha the target was made with
        assert (np.abs(after[..., :3].astype(int) - before[..., :3]).max(-1) > 40).sum() > 500  # swapped
    # each frame has its own: the stripe moved
    assert not np.array_equal(rendered[0][..., 3], rendered[1][..., 3])


def test_a_render_that_passes_the_frames_through_keeps_the_alpha(tmp_path: Path, run_env: RuntimeEnv) -> None:
    """No stage: the decoded ProRes 4444 frames go to the encoder as they are, alpha and all."""
    target = _target("prores4444", tmp_path)
    out = tmp_path / "out.mov"
    _render(target, out, run_env, "prores", sources=())
    with av.open(str(out)) as c:
        assert (c.streams.video[0].codec_context.pix_fmt or "").startswith("yuva")
    for before, after in zip(_rgba(target), _rgba(out), strict=True):
        _assert_alpha(after[..., 3], before[..., 3], PRORES_LEVELS)


@pytest.mark.parametrize("encoder", ["prores", "png"])
def test_matte_alpha_is_the_product_and_matte_clip_keeps_the_targets_alpha(
    tmp_path: Path, run_env: RuntimeEnv, encoder: EncoderName
) -> None:
    target = _target("qtpng", tmp_path)
    source = _rgba(target)
    # --matte clip (PNG, exact): the output keeps the target's alpha, the matte goes beside it
    _render(target, tmp_path / "clip", run_env, "png", matte="clip")
    kept = _rgba(tmp_path / "clip")
    mattes = [_imread(p) for p in sorted(matte_clip_path(tmp_path / "clip").glob("*.png"))]
    assert len(mattes) == len(kept) == FRAMES
    for before, after, matte in zip(source, kept, mattes, strict=True):
        np.testing.assert_array_equal(after[..., 3], before[..., 3])
        assert matte.ndim == 2 and matte.max() == 255  # a face was pasted
    # --matte alpha: the matte times the target's alpha
    out = _output(tmp_path, encoder, "both")
    _render(target, out, run_env, encoder, matte="alpha")
    for before, after, matte in zip(source, _rgba(out), mattes, strict=True):
        expected = (matte.astype(np.uint32) * before[..., 3] + 127) // 255
        assert not np.array_equal(expected, matte)  # the stripe and the soft edge cross the face
        _assert_alpha(after[..., 3], expected.astype(np.uint8), _levels(encoder))


def test_h264_says_which_encoders_keep_the_alpha_and_renders_as_before(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    target = _target("prores4444", tmp_path)
    warnings = _render(target, tmp_path / "out.mp4", run_env, "h264")
    assert [w for w in warnings if "alpha" in w] == [f"alpha channel (yuva444p12le): {KEPT_BY}"]
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert c.streams.video[0].codec_context.pix_fmt == "yuv420p"
        assert len(list(c.decode(video=0))) == FRAMES


def test_an_opaque_alpha_gives_todays_picture_with_an_opaque_alpha(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """A QuickTime PNG whose alpha is 255 everywhere renders to the same RGB as the same frames
    without alpha (what a render made of it before), with 255 as its alpha."""
    picture = _picture()
    opaque = _clip(tmp_path / "opaque.mov", "png", "rgba", picture, [_opaque(i) for i in range(FRAMES)])
    plain = _clip(tmp_path / "plain.mov", "png", "rgb24", picture, [_opaque(i) for i in range(FRAMES)])
    _render(opaque, tmp_path / "from_opaque", run_env, "png")
    _render(plain, tmp_path / "from_plain", run_env, "png")
    files = sorted((tmp_path / "from_plain").glob("*.png"))
    today = [cv2.cvtColor(_imread(f), cv2.COLOR_BGR2RGB) for f in files]
    now = _rgba(tmp_path / "from_opaque")
    assert len(now) == len(today) == FRAMES
    for before, after in zip(today, now, strict=True):
        np.testing.assert_array_equal(after[..., :3], before)
        assert (after[..., 3] == 255).all()
    keyed = _target("prores4444", tmp_path, _opaque)
    _render(keyed, tmp_path / "from_keyed.mov", run_env, "prores")
    assert all((f[..., 3] == 255).all() for f in _rgba(tmp_path / "from_keyed.mov"))


def test_the_alpha_is_enlarged_with_the_picture_by_a_frame_enhancer(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    from ffdesk.runtime.standins import write_standins

    pack = tmp_path / "pack"
    write_standins(pack, ["real_esrgan_x2"], dynamic_batch=True)
    target = _target("qtpng", tmp_path)
    out = tmp_path / "out"
    _render(target, out, run_env, "png", models_dir=pack, frame_enhancer="real_esrgan_x2")
    for before, after in zip(_rgba(target), _rgba(out), strict=True):
        assert after.shape[:2] == (2 * SIZE, 2 * SIZE)
        enlarged = cv2.resize(before[..., 3], (2 * SIZE, 2 * SIZE), interpolation=cv2.INTER_LINEAR)
        np.testing.assert_array_equal(after[..., 3], enlarged)


def test_the_alpha_is_shrunk_with_the_picture_in_preview_mode(tmp_path: Path, run_env: RuntimeEnv) -> None:
    width, height = 960, 720  # preview mode works at 540 rows: 720 x 540
    alphas = [_alpha(i, width, height) for i in range(2)]
    target = _clip(tmp_path / "wide.mov", "png", "rgba", background(width, height), alphas)
    out = tmp_path / "out"
    _render(target, out, run_env, "png", mode="preview")
    rendered = _rgba(out)
    assert len(rendered) == 2
    for alpha, after in zip(alphas, rendered, strict=True):
        assert after.shape[:2] == (540, 720)
        np.testing.assert_array_equal(
            after[..., 3], cv2.resize(alpha, (720, 540), interpolation=cv2.INTER_AREA)
        )


def test_a_farm_plan_warns_of_the_alpha_only_where_the_output_drops_it(tmp_path: Path) -> None:
    from ffdesk.pipeline.engine import plan_segments

    target = _target("prores4444", tmp_path)
    kept = plan_segments(RenderJob(target=target, output=tmp_path / "out.mov", encoder="prores"))
    assert not [w for w in kept.warnings if "alpha" in w]
    dropped = plan_segments(RenderJob(target=target, output=tmp_path / "out.mp4", encoder="h264"))
    assert [w for w in dropped.warnings if "alpha" in w] == [f"alpha channel (yuva444p12le): {KEPT_BY}"]


class _Bounded:
    """A stage that bounds the frames in flight and records what the render counts for them."""

    name = "bounded"
    flow_frames = 4

    def __init__(self) -> None:
        self.held: list[int] = []

    def process(self, batch: list[Any]) -> list[Any]:
        return batch

    def count_frames_held(self, held_bytes: int) -> None:
        self.held.append(held_bytes)


def test_the_alpha_of_the_frames_in_flight_counts_against_the_budget(tmp_path: Path) -> None:
    from ffdesk.media.probe import probe
    from ffdesk.pipeline import engine

    target = _target("prores4444", tmp_path)
    info = probe(target)
    counted = {}
    choices: tuple[tuple[EncoderName, str], ...] = (("h264", ".mp4"), ("prores", ".mov"))
    for encoder, suffix in choices:
        stage = _Bounded()
        job = RenderJob(target=target, output=tmp_path / f"out{suffix}", encoder=encoder)
        engine._bind([stage], lambda _event: None, info, job)  # type: ignore[list-item]
        (counted[encoder],) = stage.held
    assert counted["prores"] - counted["h264"] == (_Bounded.flow_frames + 1) * SIZE * SIZE  # a byte a pixel


def test_a_16_bit_alpha_is_rounded_to_8_bits_not_cut() -> None:
    from ffdesk.media.decode import alpha_array

    wide = np.zeros((4, 256, 4), np.uint16)
    wide[..., 3] = np.arange(256) * 257  # every 8-bit level, as 16 bits
    wide[..., :3] = 30000
    for fmt in ("rgba64le", "rgba64be"):
        frame = av.VideoFrame.from_ndarray(wide, format="rgba64le").reformat(format=fmt)
        alpha = alpha_array(frame)
        assert alpha is not None
        np.testing.assert_array_equal(alpha[0], np.arange(256))  # swscale's narrowing: 127 levels one low


def test_a_render_that_keeps_the_alpha_decodes_in_software_where_it_would_ask_for_nvdec(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVDEC gives the picture alone: a machine whose models run on CUDA decodes an alpha target
    in software when the output keeps the alpha, and says why in the report."""
    from ffdesk.pipeline import engine

    monkeypatch.setattr(engine, "nvdec_possible", lambda flags=None: True)
    monkeypatch.setattr(engine, "job_device", lambda provider, env: "cuda")
    asked: list[str | None] = []
    real = engine.VideoReader

    def reader(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("hwaccel"))
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "VideoReader", reader)
    target = _target("qtpng", tmp_path)
    job = RenderJob(sources=(SOURCE,), target=target, output=tmp_path / "out.mov", encoder="prores")
    report = run_render(job, env=run_env)
    assert asked and set(asked) == {None}
    assert (
        report.video is not None
        and "NVDEC: the output keeps the target's alpha channel" in report.video.decoder
    )


def test_segments_without_the_alpha_are_not_resumed_into_an_output_that_keeps_it(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A render stopped before ffdesk kept a target's alpha wrote segments without it: the
    fingerprint its work folder is opened with differs where the output keeps the alpha, so a
    resume renders again rather than splice opaque segments and transparent ones; other renders
    keep their hash."""
    from ffdesk.pipeline import engine

    opened: list[str] = []
    real = engine.Manifest.open

    def spy(folder: Path, fingerprint: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(fingerprint)
        return real(folder, fingerprint, *args, **kwargs)

    monkeypatch.setattr(engine.Manifest, "open", spy)
    target = _target("prores4444", tmp_path)
    keeps = RenderJob(sources=(SOURCE,), target=target, output=tmp_path / "out.mov", encoder="prores")
    drops = RenderJob(sources=(SOURCE,), target=target, output=tmp_path / "out.mp4", encoder="h264")
    for job in (keeps, drops):
        run_render(job, env=run_env)
    assert opened == [
        keeps.resolved().output_fingerprint(keeps_target_alpha=True),
        drops.resolved().output_fingerprint(),
    ]
    assert opened[0] != keeps.resolved().output_fingerprint()
