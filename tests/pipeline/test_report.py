"""The typed render report: what real renders report, its JSON (the `--report` file's keys stay
those scripts read), reading it back, and adding segments' reports up as a farm does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import (
    Alignment,
    FaceCounts,
    ModelsReport,
    QualityCheck,
    QualityFlag,
    RenderReport,
    ReportError,
    StageTiming,
)
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import ModelStats, OomAction, OomEvent
from ffdesk.runtime.resources import resource_path

PHOTO = resource_path("sample", "grace_hopper.jpg")

# The keys `ffdesk render --report` wrote before the report was typed, in their order (what
# users' scripts read): a clip swapped with the embedded models, the same for a still image.
CLIP_KEYS = [
    "frames_in", "frames_out", "frames_processed", "stages", "output", "resumed_segments", "encoder",
    "mode", "resumed_frames", "timestamps_repaired", "frames_concealed", "audio_packets_skipped", "audio",
    "decoder", "timecode",
    "frames_with_faces", "faces_swapped", "faces_skipped_by_reason", "faces_skipped", "seconds", "fps",
    "peak_rss_bytes", "telemetry", "shot_cuts", "shots",
]  # fmt: skip
IMAGE_KEYS = [
    "frames_in", "frames_out", "frames_processed", "stages", "output", "resumed_segments",
    "frames_with_faces", "faces_swapped", "faces_skipped_by_reason", "faces_skipped", "seconds", "fps",
    "peak_rss_bytes", "telemetry", "shot_cuts", "shots",
]  # fmt: skip
STAGE_KEYS = ["calls", "frames", "ms_total", "cpu_ms_total"]
TELEMETRY_KEYS = [
    "gpu_available", "no_gpu_reason", "samples", "interval_s", "duration_s", "frames", "memory_source",
    "memory_peak_bytes", "memory_mean_bytes", "gpu_process_memory_peak_bytes", "process_rss_peak_bytes",
    "power_source", "power_mean_w", "power_peak_w", "energy_source", "energy_j", "energy_per_frame_j",
    "gpu_util_mean_pct", "stage_ms", "model_bytes", "log_path", "log_error",
]  # fmt: skip
# A model-pack render wrote these (the face counts are new: the pack's swap stage counts faces too).
PACK_KEYS = {
    "frames_in", "frames_out", "frames_processed", "stages", "output", "encoder", "resumed_segments",
    "resumed_frames", "mode", "timestamps_repaired", "frames_concealed", "audio_packets_skipped", "audio",
    "decoder", "timecode",
    "models", "peak_model_bytes", "reserved_bytes", "memory_budget_bytes", "oom_recoveries", "oom_events",
    "swapper", "swapper_precision", "swap_scale", "quality_checked_frames", "quality_flags",
    "quality_psnr_threshold_db", "landmarker", "landmarker_note", "faces_aligned_on_68_points",
    "faces_aligned", "model_order", "pixels", "prepare_seconds", "seconds", "fps", "peak_rss_bytes",
    "telemetry", "shot_cuts", "shots",
}  # fmt: skip
FACE_KEYS = {"frames_with_faces", "faces_swapped", "faces_skipped", "faces_skipped_by_reason"}
MODEL_KEYS = [
    "key",
    "name",
    "precision",
    "provider",
    "loads",
    "host_reloads",
    "evictions",
    "bytes",
    "load_ms",
    "batch",
    "one_item_bytes",
    "late_shapes",
    "frame_calls",
]


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(
        path, width=320, height=240, fps=25.0, frames=16, face_image=face[20:260, 110:350], audio_streams=1
    )
    return path


def _cli_report(tmp_path: Path, target: Path, output: Path, *extra: str) -> dict[str, Any]:
    report = tmp_path / f"{output.stem}.json"
    args = ["render", "--target", str(target), "--output", str(output), "--no-resume", "-q"]
    assert main([*args, "--source", str(PHOTO), "--report", str(report), *extra]) == 0
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def _roundtrip(report: RenderReport) -> RenderReport:
    return RenderReport.from_json_dict(json.loads(json.dumps(report.to_json_dict())))


def test_the_report_file_keeps_the_keys_scripts_read(face_clip: Path, tmp_path: Path) -> None:
    clip = _cli_report(tmp_path, face_clip, tmp_path / "out.mp4", "--end", "0.24")
    assert list(clip) == CLIP_KEYS
    assert list(clip["stages"]) == ["decode", "detect", "track", "swap", "encode"]
    assert all(list(t) == STAGE_KEYS for t in clip["stages"].values())
    assert list(clip["telemetry"]) == TELEMETRY_KEYS
    assert clip["frames_out"] == 6 and clip["faces_swapped"] == 6 and clip["audio"] == ["copy aac"]
    assert clip["faces_skipped_by_reason"] == {} and clip["output"] == str(tmp_path / "out.mp4")

    still = tmp_path / "still.png"
    cv2.imwrite(still.as_posix(), read_image(resource_path("sample", "astronaut.jpg"))[..., ::-1])
    image = _cli_report(tmp_path, still, tmp_path / "out.png")
    assert list(image) == IMAGE_KEYS
    assert list(image["stages"]) == ["detect", "track", "swap"] and image["faces_swapped"] == 1

    # what the file holds reads back into a report that writes the same JSON
    for data in (clip, image):
        assert RenderReport.from_json_dict(data).to_json_dict() == data


def test_a_model_pack_report_keeps_its_keys_and_counts_faces(face_clip: Path, tmp_path: Path) -> None:
    from ffdesk.runtime.standins import write_standins

    pack = tmp_path / "pack"
    write_standins(pack, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    data = _cli_report(
        tmp_path, face_clip, tmp_path / "pack.mp4", "--models-dir", str(pack), "--swapper", "inswapper_128"
    )
    assert set(data) == PACK_KEYS | FACE_KEYS
    assert all(list(m) == MODEL_KEYS for m in data["models"])
    assert {m["name"] for m in data["models"]} == {"inswapper_128", "arcface_w600k_r50"}
    # the same figures the embedded swap gives: every chosen face is drawn
    assert data["frames_with_faces"] > 0 and data["faces_swapped"] >= data["frames_with_faces"]
    assert data["faces_skipped"] == 0
    report = RenderReport.from_json_dict(data)
    assert report.models is not None and report.models.swap_scale == 1
    assert report.models.quality is not None and report.models.alignment is not None
    assert report.to_json_dict() == data


def test_a_real_render_goes_to_json_and_back_unchanged(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path
) -> None:
    report = run_render(
        RenderJob(target=face_clip, output=tmp_path / "o.mp4", sources=(PHOTO,), resume=False), env=run_env
    )
    assert report.faces is not None and report.faces.faces_swapped > 0
    assert report.video is not None and report.video.encoder and report.peak_rss_bytes
    back = _roundtrip(report)
    assert back == report
    assert back.output == tmp_path / "o.mp4" and back.stages == report.stages


def test_model_figures_go_to_json_and_back_with_their_types() -> None:
    """Figures a render without a GPU rarely gives (out-of-memory recoveries, quality flags)."""
    oom = OomEvent(
        "swap@fp32", 4, 1, (OomAction.EVICTED, OomAction.HALVED_BATCH), "out of memory", ("enh@fp32",)
    )
    drop = OomEvent("swap@fp32", 1, 1, (OomAction.DROPPED_PRECISION,), "out of memory", (), "fp32", "fp16")
    models = ModelsReport(
        models=(
            ModelStats("swap@fp32", "inswapper_128", "fp32", "CUDAExecutionProvider", 2, 1, 1, 554, 12.5),
            ModelStats(
                "swap@fp16",
                "inswapper_128",
                "fp16",
                "CUDAExecutionProvider",
                1,
                0,
                1,
                300,
                8.0,
                frame_calls=0,
            ),
        ),
        peak_model_bytes=554,
        memory_budget_bytes=1000,
        oom_events=(oom, drop),
        swapper="inswapper_128",
        swapper_precision="fp16",
        swap_scale=2,
        quality=QualityCheck(8, (QualityFlag(12, 27.31),), 30.0),
        alignment=Alignment("2dfan4", "", 3, 5),
    )
    report = RenderReport(
        10, 10, 10, (StageTiming("swap", 3, 10, 40.5, 30.25),), Path("/tmp/x.mp4"), models=models
    )
    data = json.loads(json.dumps(report.to_json_dict()))
    assert data["oom_recoveries"] == 2 and data["oom_events"][0]["actions"] == ["evicted", "halved_batch"]
    assert data["quality_flags"] == [{"frame": 12, "psnr_db": 27.31}]
    back = RenderReport.from_json_dict(data)
    assert back == report
    assert back.models is not None and back.models.oom_events[1].actions == (OomAction.DROPPED_PRECISION,)
    assert [m.frame_calls for m in back.models.models] == [None, 0]  # unknown; only timed
    # a trained swapper's figures: its kind, no pack figures (their keys are left out)
    trained = ModelsReport(
        (), 0, None, (), "/runs/a/model.onnx", "fp32", swapper_kind="ffdesk-trained-swapper"
    )
    keys = set(trained.to_json_dict())
    assert "swapper_kind" in keys and not keys & {"swap_scale", "quality_flags", "landmarker"}
    assert ModelsReport.from_json_dict(trained.to_json_dict()) == trained


def test_a_report_with_a_missing_or_wrong_figure_is_refused_in_one_line(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path
) -> None:
    report = run_render(
        RenderJob(target=face_clip, output=tmp_path / "o.mp4", resume=False, end=0.2), env=run_env
    )
    data = report.to_json_dict()
    with pytest.raises(ReportError, match="^render report: 'frames_out' is missing$"):
        RenderReport.from_json_dict({k: v for k, v in data.items() if k != "frames_out"})
    with pytest.raises(ReportError, match="^render report: 'fps' is 'fast', not float$"):
        RenderReport.from_json_dict({**data, "fps": "fast"})
    with pytest.raises(ReportError, match="^render report: 'stages.encode.frames' is True, not int$"):
        RenderReport.from_json_dict(
            {**data, "stages": {"encode": {**data["stages"]["encode"], "frames": True}}}
        )
    with pytest.raises(ReportError, match=r"'oom_events\[0\]\.actions\[0\]' is 'rebooted', not OomAction"):
        event = {"key": "k", "batch_before": 2, "batch_after": 1, "actions": ["rebooted"], "error": "",
                 "evicted": [], "precision_before": None, "precision_after": None}  # fmt: skip
        ModelsReport.from_json_dict(
            {
                "models": [],
                "peak_model_bytes": 0,
                "memory_budget_bytes": None,
                "oom_events": [event],
                "swapper": "s",
                "swapper_precision": "fp32",
            }  # fmt: skip
        )


def test_segment_reports_add_up_to_the_local_render(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path
) -> None:
    """A farm adds its segments' reports up: the frames, stage calls and face counts of a clip
    rendered segment by segment are those of the same render done in one go."""
    local = run_render(
        RenderJob(target=face_clip, output=tmp_path / "local.mp4", sources=(PHOTO,), segment_frames=8),
        env=run_env,
    )
    job = RenderJob(target=face_clip, output=tmp_path / "split.mp4", sources=(PHOTO,), segment_frames=8)
    plan = plan_segments(job)
    assert len(plan.segments) == 2
    parts = [
        render_segment(plan.job, seg, tmp_path / f"seg{seg.number}.mp4", env=run_env) for seg in plan.segments
    ]
    assert [p.frames_out for p in parts] == [8, 8]
    merged = RenderReport.merge(parts)
    assert merged.frames_out == merged.frames_processed == local.frames_out == 16
    assert merged.stage_names == local.stage_names
    for name in ("decode", "swap", "encode"):
        assert merged.timing(name).frames == local.timing(name).frames == 16
    assert merged.timing("swap").calls == sum(p.timing("swap").calls for p in parts)
    assert merged.faces == local.faces and merged.faces is not None and merged.faces.faces_swapped > 0
    assert merged.seconds == pytest.approx(sum(p.seconds for p in parts), abs=0.002)
    assert merged.video is not None and local.video is not None
    assert merged.video.encoder == local.video.encoder
    # a segment's report crosses machines as JSON
    assert [RenderReport.from_json_dict(json.loads(json.dumps(p.to_json_dict()))) for p in parts] == parts


def test_face_counts_add_up_by_reason() -> None:
    a = FaceCounts.of(3, 5, {"too small": 2})
    b = FaceCounts.of(4, 1, {"profile": 1, "too small": 1})
    total = a.plus(b)
    assert (total.frames_with_faces, total.faces_swapped, total.faces_skipped) == (7, 6, 4)
    assert total.skipped("too small") == 3 and total.skipped("profile") == 1 and total.skipped("blur") == 0
    assert FaceCounts.from_json_dict(json.loads(json.dumps(total.to_json_dict()))) == total


def test_the_report_says_what_each_processor_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """FaceFusion's other processors report their model and the faces or frames they went
    through, in the order they ran; the command says it in one line; the figures survive JSON."""
    from ffdesk.runtime.standins import write_standins
    from tests.real_clips import carphone

    pack = tmp_path / "pack"
    write_standins(pack, ["fran", "modnet", "ddcolor"])
    extra = ("--models-dir", str(pack), "--age-modifier", "--background-remover", "--frame-colorizer")
    data = _cli_report(tmp_path, carphone(), tmp_path / "out.mp4", "--end", "0.3", *extra)
    assert list(data["processors"]) == ["age_modify", "background_remove", "frame_colorize"]
    age = data["processors"]["age_modify"]
    assert age["model"] == "fran" and age["faces"] >= data["frames_out"] - 1 and age["frames"] == 0
    assert data["processors"]["background_remove"] == {
        "model": "modnet",
        "faces": 0,
        "frames": data["frames_out"],
        "late_shapes": data["processors"]["background_remove"]["late_shapes"],  # on the CPU: not warmed
    }
    assert all(isinstance(p["late_shapes"], int) for p in data["processors"].values())
    assert data["processors"]["frame_colorize"]["frames"] == data["frames_out"]
    assert RenderReport.from_json_dict(data).to_json_dict() == data
    out = capsys.readouterr().out
    assert "processors: age_modify (fran): " in out and "frame_colorize (ddcolor): " in out
    plain = _cli_report(tmp_path, carphone(), tmp_path / "plain.mp4", "--end", "0.1")
    assert "processors" not in plain  # a render without them reports as before
