"""The frame enhancer as a render stage, on stand-ins that really upscale (bilinear in the graph)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.catalog import load_catalog
from ffdesk.swap import frame_enhancer as fe
from tests.real_clips import carphone

FACEFUSION_MODELS = {
    "clear_reality_x4", "face_dat_x4", "nomos8k_sc_x4", "real_esrgan_x2", "real_esrgan_x2_fp16",
    "real_esrgan_x4", "real_esrgan_x4_fp16", "real_esrgan_x8", "real_esrgan_x8_fp16", "real_hatgan_x4",
    "real_web_photo_x4", "realistic_rescaler_x4", "remacri_x4", "siax_x4", "span_kendata_x4",
    "swin2_sr_x4", "tghq_face_x8", "ultra_sharp_x4", "ultra_sharp_2_x4",
}  # fmt: skip


def _frames(path: Path) -> tuple[list[np.ndarray], list[int]]:
    with av.open(str(path)) as c:
        frames = [(f.to_ndarray(format="rgb24"), int(f.pts or 0)) for f in c.decode(video=0)]
    return [f for f, _ in frames], [p for _, p in frames]


def _pack(tmp: Path, *names: str) -> Path:
    from ffdesk.runtime.standins import write_standins

    pack = tmp / "pack"
    write_standins(pack, list(names), dynamic_batch=True)
    return pack


def test_the_catalog_holds_every_frame_enhancer_of_facefusion_with_its_tiling() -> None:
    cat = load_catalog()
    specs = {m.name: fe.frame_enhancer_spec(m) for m in cat.by_kind("frame_enhancer")}
    assert set(specs) == FACEFUSION_MODELS
    assert (specs["real_esrgan_x2"].scale, specs["real_esrgan_x8_fp16"].scale) == (2, 8)
    tiling = {n: (s.tile_size, s.tile_pad, s.tile_overlap) for n, s in specs.items()}
    assert tiling["real_esrgan_x4"] == (256, 16, 8) and tiling["span_kendata_x4"] == (128, 8, 4)
    assert tiling["real_web_photo_x4"] == (64, 4, 2) and tiling["ultra_sharp_2_x4"] == (1024, 64, 32)
    assert all(s.input_name == "input" and s.color == "RGB" and s.std == (255.0,) for s in specs.values())


@pytest.mark.parametrize("blend", [0, 35, 80, 100])
def test_blend_weights_are_facefusions(blend: int) -> None:
    """FaceFusion: factor = 1 - blend / 100; cv2.addWeighted(resized, factor, upscaled, 1 - factor)."""
    frame = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    up = np.random.default_rng(1).integers(0, 256, (18, 22, 3), dtype=np.uint8)
    factor = 1 - blend / 100
    resized = cv2.resize(frame, (22, 18))
    expected = cv2.addWeighted(resized, factor, up, 1 - (1 - (1 - factor)), 0)
    assert fe.blend_weight(blend) == pytest.approx(blend / 100)
    assert np.array_equal(fe.blend_upscaled(frame, up, blend), expected)


@pytest.mark.parametrize(("model", "scale"), [("real_esrgan_x2", 2), ("real_esrgan_x4", 4)])
def test_carphone_upscaled_keeps_its_frames_and_stamps(
    tmp_path: Path,
    run_env,
    model: str,
    scale: int,  # type: ignore[no-untyped-def]
) -> None:
    clip = carphone()
    pack = _pack(tmp_path, model)
    out = tmp_path / f"{model}.mp4"
    job = RenderJob(target=clip, output=out, models_dir=pack, frame_enhancer=model, end=1.0, quality=90)
    report = run_render(job, env=run_env)
    src, src_pts = _frames(clip)
    got, got_pts = _frames(out)
    n = report.frames_out
    assert n == len(got) and n > 20 and got_pts == src_pts[:n]
    assert got[0].shape == (144 * scale, 176 * scale, 3)
    assert report.upscale is not None
    assert (report.upscale.width, report.upscale.height, report.upscale.scale) == (
        176 * scale,
        144 * scale,
        scale,
    )
    assert report.upscale.tiles_per_frame == 1 and report.upscale.blend == 80
    # the stand-in upscales (bilinear): the picture is a plain resize of the source, within coding noise
    for i in (0, n // 2, n - 1):
        plain = cv2.resize(src[i], (176 * scale, 144 * scale), interpolation=cv2.INTER_LINEAR)
        diff = np.abs(got[i].astype(np.int16) - plain.astype(np.int16))
        inner = diff[8:-8, 8:-8]
        assert inner.mean() < 3.0, inner.mean()
    side = np.concatenate(
        [cv2.resize(src[n // 2], (176 * scale, 144 * scale), interpolation=cv2.INTER_NEAREST), got[n // 2]],
        axis=1,
    )
    cv2.imwrite(str(tmp_path / f"side_{scale}.png"), side[..., ::-1])


def test_the_stage_batches_tiles_and_agrees_with_one_tile_a_call(tmp_path: Path, run_env) -> None:  # type: ignore[no-untyped-def]
    """A 300 x 500 frame through real_web_photo_x4 (64-px tiles) is 6 x 9 tiles; batched or one a call."""
    from ffdesk.pipeline.stages.frame_enhancer import frame_enhancer_stage
    from ffdesk.runtime.standins import write_standins

    frame = np.random.default_rng(3).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    outs = []
    for dynamic in (True, False):
        pack = tmp_path / f"pack{dynamic}"
        write_standins(pack, ["real_web_photo_x4"], dynamic_batch=dynamic)
        job = RenderJob(
            target=tmp_path / "x.mp4",
            output=tmp_path / "y.mp4",
            models_dir=pack,
            frame_enhancer="real_web_photo_x4",
            frame_enhancer_blend=100,
        )
        stage = frame_enhancer_stage(job, env=run_env)
        try:
            outs.append(stage.enhance(frame))
            assert stage.tiles == 6 * 9
        finally:
            stage.finish()
    assert outs[0].shape == (1200, 2000, 3)
    assert np.abs(outs[0].astype(int) - outs[1].astype(int)).max() <= 1
    plain = cv2.resize(frame, (2000, 1200), interpolation=cv2.INTER_LINEAR)
    assert np.abs(outs[0].astype(int) - plain.astype(int))[4:-4, 4:-4].max() <= 2  # seamless


def test_a_model_with_the_wrong_contract_is_refused_in_one_line(tmp_path: Path, run_env) -> None:  # type: ignore[no-untyped-def]
    """An x2 file under an x4 name; a file whose input is not 'input'."""
    from dataclasses import replace

    from ffdesk.pipeline.stages.frame_enhancer import frame_enhancer_stage
    from ffdesk.runtime.files import save_onnx_atomic
    from ffdesk.runtime.standins import build_standin

    cat = load_catalog()
    pack = tmp_path / "pack"
    pack.mkdir()
    x2 = build_standin(cat.get("real_esrgan_x2"))
    save_onnx_atomic(x2, pack / "real_esrgan_x4.onnx")
    wrong = replace(
        cat.get("real_esrgan_x8"), inputs=(replace(cat.get("real_esrgan_x8").inputs[0], name="image"),)
    )
    save_onnx_atomic(build_standin(wrong), pack / "real_esrgan_x8.onnx")
    for name, says in (
        ("real_esrgan_x4", "x4 (256-px tiles in, 1024x1024 out)"),
        ("real_esrgan_x8", "missing input 'input'"),
    ):
        job = RenderJob(
            target=tmp_path / "x.mp4", output=tmp_path / "y.mp4", models_dir=pack, frame_enhancer=name
        )
        with pytest.raises(UserError) as err:
            frame_enhancer_stage(job, env=run_env)
        assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="between 0 and 100"):
        RenderJob(
            target=tmp_path / "x.mp4",
            output=tmp_path / "y.mp4",
            frame_enhancer="real_esrgan_x4",
            frame_enhancer_blend=101,
        )


def test_the_command_line_says_the_output_size_and_refuses_a_bad_model(tmp_path: Path) -> None:
    clip = carphone()
    pack = _pack(tmp_path, "real_esrgan_x2")
    base = [
        sys.executable,
        "-m",
        "ffdesk",
        "render",
        "--target",
        str(clip),
        "--models-dir",
        str(pack),
        "--end",
        "0.3",
    ]
    ok = subprocess.run(
        [*base, "--output", str(tmp_path / "a.mp4"), "--frame-enhancer", "real_esrgan_x2"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ok.returncode == 0, ok.stderr
    assert "352x288 (x2 by real_esrgan_x2)" in ok.stdout
    bad = subprocess.run(
        [*base, "--output", str(tmp_path / "b.mp4"), "--frame-enhancer", "real_esrgan_x4"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "real_esrgan_x4" in bad.stderr
    assert not (tmp_path / "b.mp4").exists()


def test_a_preview_mode_render_leaves_the_frame_enhancer_off(tmp_path: Path, run_env) -> None:  # type: ignore[no-untyped-def]
    """A preview-mode render is a fast draft at the source's size, as with the face enhancer."""
    pack = _pack(tmp_path, "real_esrgan_x2")
    job = RenderJob(
        target=carphone(),
        output=tmp_path / "draft.mp4",
        models_dir=pack,
        frame_enhancer="real_esrgan_x2",
        end=0.2,
        mode="preview",
    )
    events: list[object] = []
    report = run_render(job, events.append, env=run_env)
    assert report.upscale is None
    assert _frames(tmp_path / "draft.mp4")[0][0].shape == (144, 176, 3)
    said = [e.message for e in events if isinstance(e, ev.Warning)]
    assert any("--frame-enhancer is off in preview mode" in m for m in said), said  # said, not silent


def test_the_matte_follows_the_upscale(tmp_path: Path, run_env) -> None:  # type: ignore[no-untyped-def]
    """A matte asked of an upscaled render is the pasted faces' matte enlarged with the frame: the
    same as a render without the enhancer, upscaled."""
    from ffdesk.media.matte import matte_clip_path
    from ffdesk.runtime.resources import resource_path

    pack = _pack(tmp_path, "real_esrgan_x2")
    common = {
        "target": carphone(),
        "sources": (resource_path("sample", "grace_hopper.jpg"),),
        "encoder": "prores",
        "matte": "clip",
        "end": 0.3,
    }
    plain = RenderJob(output=tmp_path / "plain.mov", **common)  # type: ignore[arg-type]
    big = RenderJob(output=tmp_path / "big.mov", models_dir=pack, frame_enhancer="real_esrgan_x2", **common)  # type: ignore[arg-type]
    run_render(plain, env=run_env)
    run_render(big, env=run_env)
    small, _ = _frames(matte_clip_path(plain.output))
    large, _ = _frames(matte_clip_path(big.output))
    assert len(small) == len(large) > 5
    for a, b in zip(small, large, strict=True):
        assert b.shape == (288, 352, 3) and a[..., 0].max() > 200  # a face was pasted
        up = cv2.resize(a[..., 0], (352, 288), interpolation=cv2.INTER_LINEAR)
        assert np.abs(up.astype(int) - b[..., 0]).mean() < 2.0


def test_upscaling_alone_under_a_cpu_budget_counts_and_bounds_its_enlarged_frames(
    tmp_path: Path, run_env, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The frame enhancer with no swap, on its own CPU budget: the frames the render holds at once
    (a batch in its hands, the next waiting, the decoder's and the encoder's) count against the
    budget with their enlarged pictures, and no more frames than that are ever alive. A budget
    without room for them beside the model is refused in one line, and nothing is written."""
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.stages.models import enlarged_frame_bytes
    from tests.packets_alive import bytes_held_told, count_packets_alive

    clip = carphone()
    pack = _pack(tmp_path, "real_esrgan_x2")
    held = bytes_held_told(monkeypatch)
    alive = count_packets_alive(monkeypatch)
    frames = 2 * 2 + 1 + 1  # --batch 2
    need = frames * enlarged_frame_bytes(probe(clip), 2)
    job = RenderJob(
        target=clip, output=tmp_path / "up.mp4", models_dir=pack, frame_enhancer="real_esrgan_x2",
        end=1.2, batch=2, memory_budget=need + (64 << 20),
    )  # fmt: skip
    report = run_render(job, env=run_env)
    assert report.frames_out > 3 * frames and held == [need]
    assert 2 <= alive[1] <= frames, alive
    small = replace(job, output=tmp_path / "small.mp4", memory_budget=need)  # no room for the model
    with pytest.raises(UserError, match="the frames the render holds back") as refused:
        run_render(small, env=run_env)
    assert len(str(refused.value).splitlines()) == 1 and not small.output.exists()
