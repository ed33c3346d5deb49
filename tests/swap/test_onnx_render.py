"""End-to-end renders with small stand-in models of a FaceFusion pack (`--swapper inswapper_128`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.faces.tracking import TrackerSettings
from ffdesk.media.images import read_image
from ffdesk.media.probe import probe
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import frames_at_once, held_frame_bytes
from ffdesk.runtime import sessions
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins

FRAMES = 8
"""Frames each render takes: the tracker confirms the face within them, and it is swapped in every
one (the frames before its confirmation are held back until then)."""
CLIP_FRAMES = 96
"""The clip's length: its face moves a few pixels a frame."""
MODELS = [
    "inswapper_128",
    "hyperswap_1a_256",
    "arcface_w600k_r50",
    "xseg_1",
    "bisenet_resnet_34",
    "gfpgan_1.4",
]


@pytest.fixture(scope="session")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pack")
    write_standins(folder, MODELS, dynamic_batch=True)
    return folder


@pytest.fixture(scope="module")
def _variants(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("variants")


@pytest.fixture(autouse=True)
def _shared_variants(_variants: Path) -> None:
    """The pack's FP16 and INT8 variants are cached for the module, as a user's cache keeps them
    between renders (each in a folder of the test's own otherwise): the preview render took the
    INT8 calibration again, in a process of its own, that the INT8 test had done (3.6 s). The
    rest of the cache (footprints, precision choices) stays the test's own."""
    from ffdesk.runtime.env import RuntimeEnv

    own = RuntimeEnv.from_system().variants_dir
    own.parent.mkdir(parents=True, exist_ok=True)
    own.symlink_to(_variants, target_is_directory=True)


@pytest.fixture(scope="session")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    # slow motion: the face moves a few pixels a frame over the rendered part
    synth_clip(path, width=480, height=270, fps=25, frames=CLIP_FRAMES, face_image=face)
    return path


def render(pack: Path, clip: Path, out: Path, *extra: str) -> dict[str, Any]:
    report = out.with_suffix(".json")
    args = [
        "render",
        "--target",
        str(clip),
        "--output",
        str(out),
        "--no-resume",
        "-q",
        "--end",
        str(FRAMES / 25),
    ]
    args += ["--source", str(resource_path("sample", "grace_hopper.jpg"))]
    args += ["--models-dir", str(pack), "--swapper", "inswapper_128", "--report", str(report), *extra]
    assert main(args) == 0
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def frames_of(folder: Path) -> list[np.ndarray]:
    return [read_image(p) for p in sorted(folder.glob("*.png"))]


@pytest.fixture(scope="module")
def generous(
    pack: Path, face_clip: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("generous") / "frames"
    return render(pack, face_clip, out, "--encoder", "png", "--precision", "fp32"), out


def test_render_with_an_inswapper_pack_swaps_the_face(
    generous: tuple[dict[str, Any], Path], face_clip: Path
) -> None:
    report, out = generous
    assert report["frames_out"] == FRAMES
    names = {m["name"]: m for m in report["models"]}
    assert {"inswapper_128", "arcface_w600k_r50"} <= set(names)
    assert names["inswapper_128"]["precision"] == "fp32" and names["inswapper_128"]["loads"] == 1
    assert report["peak_model_bytes"] >= names["inswapper_128"]["bytes"] > 0
    assert report["memory_budget_bytes"] is None and report["oom_recoveries"] == 0
    frames = frames_of(out)
    assert len(frames) == FRAMES
    from ffdesk.media.decode import VideoReader

    with VideoReader(face_clip, end_s=FRAMES / 25) as reader:
        originals = [f.image for f in reader]
    changed = [
        float((a.astype(int) - b.astype(int)).any(-1).mean()) for a, b in zip(originals, frames, strict=True)
    ]
    # the face (about 40 x 50 px of 320 x 180) is replaced; the rest of the picture is not
    assert all(0.005 < c < 0.2 for c in changed), changed


def test_one_model_budget_gives_the_same_frames(pack: Path, face_clip: Path, tmp_path: Path) -> None:
    loose = render(pack, face_clip, tmp_path / "loose", "--encoder", "png", "--precision", "fp32")
    # footprints measured by that run are recorded, so this one plans with the same sizes
    # (one item a call under a budget this tight; on the CPU the runtimes' own memory beside)
    # (and beside the frames the render holds at once, which a CPU budget counts too: a batch
    # of four, the tracking's, the decoder's and the encoder's)
    sizes = sorted(m["one_item_bytes"] for m in loose["models"])
    reserved = loose["reserved_bytes"]
    held = frames_at_once(RenderJob.batch, 1, held_back(TrackerSettings())) * held_frame_bytes(
        probe(face_clip)
    )
    budget = reserved + sizes[-1] + 1024 + held
    assert budget - held < reserved + sizes[-1] + sizes[-2], "the stand-ins must not fit two at a time"
    assert loose["peak_model_bytes"] + reserved > budget - held
    assert sum(m["evictions"] for m in loose["models"]) == 0
    tight = render(
        pack,
        face_clip,
        tmp_path / "tight",
        "--encoder",
        "png",
        "--precision",
        "fp32",
        "--memory-budget",
        str(budget),
    )
    assert tight["memory_budget_bytes"] == budget and tight["model_order"]["held_bytes"] == held
    assert tight["peak_model_bytes"] + tight["reserved_bytes"] <= budget - held
    assert sum(m["evictions"] for m in tight["models"]) >= 1
    a_frames, b_frames = frames_of(tmp_path / "loose"), frames_of(tmp_path / "tight")
    assert len(a_frames) == len(b_frames) == FRAMES
    for a, b in zip(a_frames, b_frames, strict=True):
        np.testing.assert_array_equal(a, b)


def test_injected_out_of_memory_is_recovered_without_losing_a_frame(
    pack: Path,
    face_clip: Path,
    tmp_path: Path,
    generous: tuple[dict[str, Any], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_run = sessions.OrtSession.run
    failures: list[int] = []

    def flaky(self: sessions.OrtSession, inputs: Any) -> Any:
        batch = len(inputs.get("target", ()))
        if self.name == "inswapper_128" and batch > 1 and not failures:
            failures.append(batch)
            raise RuntimeError("Failed to allocate memory for requested buffer of size 123456")
        return real_run(self, inputs)

    monkeypatch.setattr(sessions.OrtSession, "run", flaky)
    monkeypatch.setattr("ffdesk.pipeline.flow.BATCH_LINGER_S", 2.0)  # batches fill however slow the feed
    out = tmp_path / "frames"
    report = render(pack, face_clip, out, "--encoder", "png", "--precision", "fp32")
    assert failures, "the swapper never ran a batch"
    assert report["oom_recoveries"] == 1
    event = report["oom_events"][0]
    assert event["batch_after"] < event["batch_before"] == failures[0]
    got, want = frames_of(out), frames_of(generous[1])
    assert len(got) == len(want) == FRAMES
    for a, b in zip(want, got, strict=True):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 2


def test_int8_render_reports_int8_for_the_swapper(pack: Path, face_clip: Path, tmp_path: Path) -> None:
    report = render(pack, face_clip, tmp_path / "out.mp4", "--precision", "int8")
    assert report["frames_out"] == FRAMES
    assert report["swapper_precision"] == "int8"
    int8 = [m for m in report["models"] if m["name"] == "inswapper_128" and m["precision"] == "int8"]
    assert int8 and int8[0]["loads"] == 1
    assert report["quality_checked_frames"] >= 1
    assert isinstance(report["quality_flags"], list)
    # its cached variant cut off (a disk that failed outside ffdesk): the next render calibrates
    # a new one (it took the file for made, passed no calibration frames and failed once)
    from ffdesk.runtime import precision as prec
    from ffdesk.runtime.env import RuntimeEnv

    variant = prec.variant_path(
        pack / "inswapper_128.onnx", "int8", cache_dir=RuntimeEnv.from_system().variants_dir
    )
    whole = variant.read_bytes()
    variant.write_bytes(whole[: len(whole) // 3])
    again = render(pack, face_clip, tmp_path / "again.mp4", "--precision", "int8")
    assert again["frames_out"] == FRAMES and again["swapper_precision"] == "int8"
    assert prec.cached_sound(variant)


def test_masks_enhancer_and_tiled_swap_run_in_the_render(pack: Path, face_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    report = render(
        pack, face_clip, out, "--mask", "occlusion,region", "--enhancer", "gfpgan_1.4", "--swap-scale", "2"
    )
    assert report["swap_scale"] == 2 and report["frames_out"] == FRAMES
    names = {m["name"] for m in report["models"]}
    assert {"xseg_1", "bisenet_resnet_34", "gfpgan_1.4"} <= names
    assert report["stages"]["enhance"]["frames"] == FRAMES


def test_preview_mode_leaves_the_enhancer_off(pack: Path, face_clip: Path, tmp_path: Path) -> None:
    report = render(pack, face_clip, tmp_path / "draft.mp4", "--enhancer", "gfpgan_1.4", "--mode", "preview")
    assert report["frames_out"] == FRAMES
    assert "enhance" not in report["stages"]
    assert "gfpgan_1.4" not in {m["name"] for m in report["models"]}


def test_missing_model_and_unknown_mask_exit_2(
    pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    photo = str(resource_path("sample", "grace_hopper.jpg"))
    base = ["render", "--target", str(face_clip), "--output", str(tmp_path / "o.mp4"), "-q", "--no-resume"]
    base += ["--source", photo, "--models-dir", str(pack)]
    assert main([*base, "--swapper", "hyperswap_1b_256"]) == 2
    assert "hyperswap_1b_256.onnx" in capsys.readouterr().err
    assert main([*base, "--swapper", "inswapper_128", "--mask", "hat"]) == 2
    assert "hat" in capsys.readouterr().err
    assert main([*base, "--swapper", "inswapper_128", "--memory-budget", "4KiB"]) == 2
    assert "memory budget" in capsys.readouterr().err
    cut = tmp_path / "cut" / "inswapper_128.onnx"
    cut.parent.mkdir()
    cut.write_bytes((pack / "inswapper_128.onnx").read_bytes()[:5000])
    assert main([*base, "--swapper", str(cut)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" not in line]
    assert len(err) == 1 and "inswapper_128.onnx: truncated or not an ONNX model" in err[0]
    wrong = tmp_path / "cut" / "yoloface_8n.onnx"
    wrong.write_bytes((pack / "xseg_1.onnx").read_bytes())
    assert main([*base, "--swapper", "inswapper_128", "--detector", str(wrong)]) == 2
    assert "yoloface_8n.onnx" in capsys.readouterr().err
    assert not (tmp_path / "o.mp4").exists()


def test_quality_guard_flags_faces_that_drift_from_fp32(
    pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.pipeline.stages import models

    monkeypatch.setattr(models, "QUALITY_PSNR_DB", 200.0)  # any difference at all is flagged
    report = render(pack, face_clip, tmp_path / "out.mp4", "--precision", "fp16")
    assert report["swapper_precision"] == "fp16"
    assert report["quality_checked_frames"] >= 1
    flags = report["quality_flags"]
    assert flags and all(0 <= f["frame"] < FRAMES and f["psnr_db"] < 200.0 for f in flags)
    fp32 = [m for m in report["models"] if m["name"] == "inswapper_128" and m["precision"] == "fp32"]
    assert fp32 and fp32[0]["loads"] == 1  # the reference path ran on the sampled frames


def test_a_256_px_swapper_renders(pack: Path, face_clip: Path, tmp_path: Path) -> None:
    report = render(pack, face_clip, tmp_path / "out.mp4", "--swapper", "hyperswap_1a_256")
    assert report["frames_out"] == FRAMES
    assert report["swapper"] == "hyperswap_1a_256"
    assert {"hyperswap_1a_256", "arcface_w600k_r50"} <= {m["name"] for m in report["models"]}


def test_model_render_keeps_every_pixel_outside_the_pasted_faces(
    pack: Path, face_clip: Path, tmp_path: Path
) -> None:
    """Swap, masks and enhancer paste regions only: with lossless H.264 every luma sample away
    from the face is exactly what the source decodes to."""
    import av

    out = tmp_path / "out.mp4"
    # (no occlusion mask: the random XSeg stand-in hides most of the face from both pastes)
    report = render(pack, face_clip, out, "--quality", "100", "--enhancer", "gfpgan_1.4", "--mask", "region")
    assert report["frames_out"] == FRAMES

    def lumas(path: Path) -> list[np.ndarray]:
        with av.open(str(path)) as c:
            return [f.to_ndarray(format="gray") for f in c.decode(video=0)][:FRAMES]

    for a, b in zip(lumas(face_clip), lumas(out), strict=True):
        changed = a != b
        ys, xs = np.nonzero(changed)
        assert changed.sum() > 200  # the face was swapped
        box = (xs.max() - xs.min() + 1) * (ys.max() - ys.min() + 1)
        assert box < 0.25 * a.size  # ... and only around it
