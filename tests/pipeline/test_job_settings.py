"""Provider, swap scale and video preset: typed fields of a job, checked once, refused in one line."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.commands.render import job_from_args, register
from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import PROVIDERS, SWAP_SCALES, RenderJob
from ffdesk.pipeline.plan import build_stages
from ffdesk.pipeline.providers import job_device, session_options
from ffdesk.runtime.env import RuntimeEnv


def _job(**kw: object) -> RenderJob:
    return RenderJob(target=Path("/in.mp4"), output=Path("/out.mp4"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"provider": "gpu"}, "unknown provider 'gpu'"),
        ({"provider": "CPU"}, "unknown provider 'CPU'"),
        ({"swap_scale": 3}, "swap scale must be 1, 2 or 4, not 3"),
        ({"swap_scale": "2"}, "not '2'"),
        ({"swap_scale": True}, "not True"),
        ({"swap_scale": 2.0}, "not 2.0"),
        ({"video_preset": "turbo"}, "unknown video preset 'turbo'"),
    ],
)
def test_a_bad_provider_or_swap_scale_is_one_line(change: dict[str, object], fragment: str) -> None:
    with pytest.raises(UserError) as info:
        _job(**change)
    assert fragment in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UserError):  # a copy is checked the same way
        replace(_job(), **change)  # type: ignore[arg-type]


def test_every_choice_is_accepted_and_changes_the_fingerprint() -> None:
    prints = {_job(provider=p, swap_scale=s).output_fingerprint() for p in PROVIDERS for s in SWAP_SCALES}
    assert len(prints) == len(PROVIDERS) * len(SWAP_SCALES)


def test_a_preset_changes_the_fingerprint_and_jobs_without_one_keep_theirs() -> None:
    # the hashes jobs had before the preset was a setting: interrupted renders still resume
    assert _job().output_fingerprint() == "69dcf31913c69913"
    assert _job(mode="preview", provider="cpu").output_fingerprint() == "194691c6b0e5daaf"
    prints = {_job(video_preset=p).output_fingerprint() for p in (None, "ultrafast", "medium", "veryslow")}
    assert len(prints) == 4


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["render", "--target", "/in.mp4", "--output", "/out.mp4", *argv])


def test_the_cli_fills_the_fields() -> None:
    job = job_from_args(
        _args("--provider", "tensorrt", "--swap-scale", "4", "--swapper", "inswapper_128", "-s", "/a.jpg")
    )
    assert (job.provider, job.swap_scale) == ("tensorrt", 4)
    job = job_from_args(_args())
    assert (job.provider, job.swap_scale, job.video_preset) == ("auto", 1, None)
    assert job_from_args(_args("--video-preset", "ultrafast")).video_preset == "ultrafast"
    with pytest.raises(SystemExit):
        _args("--video-preset", "turbo")


def test_the_short_options_are_facefusions() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["render", "-t", "/in.mp4", "-s", "/a.jpg", "-s", "/b.jpg", "-o", "/out.mp4"])
    assert (args.target, args.output, args.source) == (
        Path("/in.mp4"),
        Path("/out.mp4"),
        [Path("/a.jpg"), Path("/b.jpg")],
    )


@pytest.mark.parametrize(
    ("beside", "named"),
    [
        (("--source", "/b.jpg"), "--source"),
        (("--face-selection", "all"), "--face-selection"),
        (("--reference-face", "1"), "--reference-face"),
    ],
)
def test_a_face_map_refuses_what_it_would_ignore(beside: tuple[str, str], named: str) -> None:
    # `--map 0=a.jpg --source b.jpg --reference-face 3` rendered with a.jpg alone, without a word
    with pytest.raises(UserError, match=f"--map gives each person their own photo .*; {named} would be"):
        job_from_args(_args("--map", "0=/a.jpg", *beside))
    assert job_from_args(_args("--map", "0=/a.jpg")).face_map[0].sources == (Path("/a.jpg"),)


def test_a_models_folder_that_is_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--models-dir .*nowhere: no such folder$"):
        job_from_args(_args("--models-dir", str(tmp_path / "nowhere")))
    assert job_from_args(_args("--models-dir", str(tmp_path))).models_dir == tmp_path


def test_the_people_pass_takes_a_sequences_frame_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    # the render's pass over an image sequence read it at 24 frames/s whatever --fps said, so its
    # --start/--end looked at other frames than `ffdesk faces --fps` listed people from
    from ffdesk.pipeline import people

    seen: dict[str, object] = {}

    def find(path: Path, recognizer: object, **kw: object) -> object:
        seen.update(kw)
        return None

    monkeypatch.setattr(people, "find_people", find)
    people.job_people(_job(fps=12.0, start=1.0), analyser=None, recognizer=None)  # type: ignore[arg-type]
    assert seen["fps"] == 12.0


def test_a_reference_face_selects_by_reference() -> None:
    # `--reference-face 1` alone used to be ignored without a word: the largest face was swapped
    assert job_from_args(_args()).face_selection == "largest"
    job = job_from_args(_args("--reference-face", "1"))
    assert (job.face_selection, job.reference_face) == ("reference", 1)
    assert job_from_args(_args("--face-selection", "all")).face_selection == "all"
    with pytest.raises(UserError, match="--reference-face is for --face-selection reference, not all"):
        job_from_args(_args("--face-selection", "all", "--reference-face", "0"))
    with pytest.raises(SystemExit):
        _args("--reference-face", "-1")


def test_session_options_follow_the_provider(tmp_path: Path) -> None:
    env = RuntimeEnv.in_folder(tmp_path, DriverFlags(no_nvml=True))
    assert job_device("cpu", env) == "cpu"
    assert job_device("auto", env) == "cpu"  # NVML switched off: no GPU is seen
    trt = session_options("tensorrt", "cuda", env, "fp16")
    assert trt.tensorrt and trt.trt_fp16 and trt.device == "cuda"
    assert trt.cache_dir == env.trt_cache_dir and trt.driver == env.driver  # the environment's
    cpu = session_options("cpu", "cpu", env, "fp16")
    assert not cpu.tensorrt and cpu.device == "cpu"


def test_cli_bad_swap_scale_and_one_the_embedded_swap_cannot_do_are_exit_2(
    run_env: RuntimeEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=96, height=64, fps=25, frames=3)
    face = tmp_path / "face.png"
    cv2.imwrite(str(face), np.full((64, 64, 3), 128, np.uint8))
    base = ["render", "--target", str(clip), "--output", str(tmp_path / "o.mp4"), "-q"]
    assert main([*base, "--swap-scale", "3"]) == 2
    capsys.readouterr()
    assert main([*base, "--source", str(face), "--swap-scale", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--swap-scale needs a swapper model" in err[0]
    assert not (tmp_path / "o.mp4").exists()
    with pytest.raises(UserError):
        build_stages(
            RenderJob(target=clip, output=tmp_path / "o.mp4", sources=(face,), swap_scale=4), env=run_env
        )


def test_a_render_encodes_with_the_jobs_preset(run_env: RuntimeEnv, tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=96, height=64, fps=25, frames=3)
    options = {}
    for preset in ("ultrafast", "veryslow"):
        out = tmp_path / f"{preset}.mp4"
        argv = ["render", "--target", str(clip), "--output", str(out), "-q", "--video-preset", preset]
        assert main(argv) == 0
        data = out.read_bytes()
        start = data.index(b"options: ")
        options[preset] = set(data[start : data.index(b"\x00", start)].decode().split())
    assert "subme=0" in options["ultrafast"] and "subme=10" in options["veryslow"]


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("quality", 101, "--quality"), ("quality", -1, "--quality"), ("batch", 0, "--batch"),
        ("enhancer_weight", 1.5, "--enhancer-weight"), ("enhancer_weight", float("nan"), "--enhancer-weight"),
        ("enhancer_blend", 101, "--enhancer-blend"), ("mask_regions", ("hat",), "--mask-regions"),
        ("precision", "fp8", "--precision"), ("mode", "draft", "--mode"), ("encoder", "av2", "--encoder"),
        ("face_selection", "biggest", "--face-selection"), ("memory_budget", 0, "--memory-budget"),
    ],
)  # fmt: skip
def test_every_setting_is_checked_where_every_job_is_built(field: str, value: object, option: str) -> None:
    """One check for every front end (command line, app, queue file, farm): a value out of its
    range or its choices is one line naming the option, whoever built the job."""
    from ffdesk.pipeline.job_json import job_from_json, job_to_json

    with pytest.raises(UserError) as err:
        _job(**{field: value})
    assert option in str(err.value) and "\n" not in str(err.value)
    document = json.loads(job_to_json(_job()))
    document["job"][field] = list(value) if isinstance(value, tuple) else value
    with pytest.raises(UserError, match=option.lstrip("-").replace("-", ".")):
        job_from_json(json.dumps(document))


def test_a_resolved_job_keeps_what_the_apps_people_pass_saw(tmp_path: Path) -> None:
    """The centroid of a mapped person and its recognizer survive `resolved()` (they were dropped,
    so a render made the pass again, and live, which cannot, refused the app's mapping); the
    output fingerprint is the one a job without them has."""
    from ffdesk.pipeline.job import FaceMapping

    seen = FaceMapping(0, (tmp_path / "a.jpg",), (0.25, -0.5), "dlib_resnet_v1")
    job = RenderJob(target=tmp_path / "c.mp4", output=tmp_path / "o.mp4", face_map=(seen,))
    resolved = job.resolved().face_map[0]
    assert (resolved.centroid, resolved.recognizer) == ((0.25, -0.5), "dlib_resnet_v1")
    plain = replace(job, face_map=(FaceMapping(0, (tmp_path / "a.jpg",)),))
    assert job.resolved().output_fingerprint() == plain.resolved().output_fingerprint()


def test_asking_for_a_gpu_the_machine_has_not_is_one_warning(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--provider cuda` where CUDA cannot run fell back to the CPU without a word."""
    from ffdesk.pipeline.plan import provider_unusable
    from ffdesk.runtime import sessions

    job = _job(provider="cuda")
    monkeypatch.setattr(sessions, "cuda_usable", lambda flags=None: False)
    monkeypatch.setattr("onnxruntime.get_available_providers", lambda: ["CPUExecutionProvider"])
    assert provider_unusable(job, run_env) == [
        "--provider cuda: this ONNX Runtime has no CUDA provider (onnxruntime-gpu is not installed); "
        "the models run on the CPU"
    ]
    assert provider_unusable(replace(job, provider="auto"), run_env) == []  # the CPU is what auto means here
    monkeypatch.setattr(sessions, "cuda_usable", lambda flags=None: True)
    assert provider_unusable(job, run_env) == []


def test_an_image_render_says_it_wrote_an_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # it said "(1 frames, 3.2 frames/s)"
    from ffdesk.runtime.resources import resource_path

    out = tmp_path / "photo.jpg"
    assert main(["render", "-t", str(resource_path("sample", "grace_hopper.jpg")), "-o", str(out), "-q"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"wrote {out} (an image, ") and line.endswith(" s)"), line


def test_an_image_render_takes_the_quality_asked_for(tmp_path: Path) -> None:
    # a JPEG came out byte for byte the same at --quality 10 as without it (always 95)
    from ffdesk.runtime.resources import resource_path

    photo = str(resource_path("sample", "grace_hopper.jpg"))
    sizes = {}
    for quality in ("10", None):
        out = tmp_path / f"q{quality}.jpg"
        assert (
            main(["render", "-t", photo, "-o", str(out), "-q", *(["--quality", quality] if quality else [])])
            == 0
        )
        sizes[quality] = out.stat().st_size
    assert sizes["10"] < 0.5 * sizes[None]


def test_lossless_h264_says_what_plays_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --quality 100 is x264's CRF 0: a profile most players and editing apps refuse, without a word
    clip = synth_clip(tmp_path / "c.mp4", width=64, height=48, frames=3).path
    for quality, said in (("100", True), ("99", False)):
        assert (
            main(
                [
                    "render",
                    "-t",
                    str(clip),
                    "-o",
                    str(tmp_path / f"{quality}.mp4"),
                    "-q",
                    "--quality",
                    quality,
                ]
            )
            == 0
        )
        err = capsys.readouterr().err
        assert ("--quality 100 is lossless H.264 with x264 (High 4:4:4 Predictive)" in err) is said, err


def test_prores_in_matroska_says_it_loses_the_pixel_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # carphone's 176x144 at SAR 128:117 came out square in an .mkv, without a word
    from tests.real_clips import carphone

    args = ["render", "-t", str(carphone()), "--encoder", "prores", "-q", "--end", "0.1"]
    assert main([*args, "-o", str(tmp_path / "a.mkv")]) == 0
    assert "a.mkv: ProRes in Matroska loses the pixel shape (SAR 128:117)" in capsys.readouterr().err
    assert main([*args, "-o", str(tmp_path / "a.mov")]) == 0
    assert "pixel shape" not in capsys.readouterr().err
