"""End-to-end renders through the engine on synthesized clips."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.errors import Cancelled, UserError
from ffdesk.media.decode import rgb_array
from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import work_dir_for
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "clip.mp4"
    synth_clip(path, width=192, height=108, fps=25, frames=60, audio_streams=1)
    return path


@pytest.fixture(scope="session")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "long.mp4"
    synth_clip(path, width=320, height=180, fps=25, frames=250, audio_streams=2)
    return path


def decoded_indices(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        return [frame_index_of(rgb_array(f)) for f in c.decode(video=0)]


def audio_seconds(path: Path) -> list[float]:
    info = probe(path)
    return [a.duration_s for a in info.audio]


def test_identity_render_keeps_every_frame_once_and_the_audio(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.mp4"
    events: list[ev.Event] = []
    report = run_render(RenderJob(target=clip, output=out, segment_frames=16), events.append, env=run_env)
    assert decoded_indices(out) == list(range(60))
    assert report.frames_in == report.frames_out == 60
    assert report.resumed_segments == 0
    assert report.seconds > 0 and report.fps > 0 and report.output == out
    assert report.stage_names == ("decode", "encode")
    assert report.timing("encode").frames == 60
    assert report.peak_rss_bytes is not None and report.peak_rss_bytes > 10_000_000
    assert report.video is not None and report.video.audio == ("copy aac",)
    assert report.faces is None and report.models is None  # no stage swaps faces or runs models
    assert len(probe(out).audio) == 1
    assert abs(audio_seconds(out)[0] - probe(clip).audio[0].duration_s) < 0.1
    assert any(isinstance(e, ev.Progress) and e.frames_done == 60 for e in events)
    assert isinstance(events[-1], ev.Done)
    assert not work_dir_for(out).exists()
    assert clip.stat().st_size > 0


def test_trim_keeps_the_range_and_audio_in_step(run_env: RuntimeEnv, long_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "trim.mp4"
    report = run_render(RenderJob(target=long_clip, output=out, start=2.0, end=4.0), env=run_env)
    idx = decoded_indices(out)
    assert idx[0] == 50 and idx[-1] == 99 and idx == list(range(50, 100))
    assert report.frames_out == 50
    durations = audio_seconds(out)
    assert len(durations) == 2 and all(abs(d - 2.0) < 0.1 for d in durations)


class SlowInvert:
    """A stage that inverts frames slowly, so a render can be interrupted mid-way."""

    name = "invert"
    max_batch = 4
    edits_regions = False
    workers = 2

    def __init__(self, delay: float = 0.0, fail_at: int | None = None) -> None:
        self.delay = delay
        self.fail_at = fail_at

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(self.delay)
        for p in batch:
            if p.index == self.fail_at:
                raise RuntimeError("stage exploded")
            p.image = 255 - p.image
        return list(batch)

    def finish(self) -> None:
        return None


def test_cancel_leaves_no_output_and_a_resumable_manifest(
    run_env: RuntimeEnv, long_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [SlowInvert(0.01)])
    out = tmp_path / "cancel.mp4"
    cancel = threading.Event()

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 40:
            cancel.set()

    job = RenderJob(target=long_clip, output=out, sources=(long_clip,), segment_frames=10)
    with pytest.raises(Cancelled):
        run_render(job, on_event, cancel, env=run_env)
    assert not out.exists()
    assert not any(p.name.startswith(".out") or p.suffix == ".mp4" for p in tmp_path.iterdir() if p != out)
    report = run_render(job, env=run_env)
    assert report.resumed_segments >= 3
    idx = decoded_indices(out)
    assert len(idx) == 250 and idx == list(range(250)) or _inverted_indices(out) == list(range(250))


def _inverted_indices(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        return [frame_index_of(255 - rgb_array(f)) for f in c.decode(video=0)]


def test_a_failing_stage_fails_the_render_without_output(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [SlowInvert(fail_at=20)])
    out = tmp_path / "fail.mp4"
    with pytest.raises(RuntimeError, match="stage exploded"):
        run_render(RenderJob(target=clip, output=out, sources=(clip,)), env=run_env)
    assert not out.exists()


def test_stage_output_is_what_gets_encoded(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [SlowInvert()])
    out = tmp_path / "inv.mp4"
    report = run_render(RenderJob(target=clip, output=out, sources=(clip,), batch=3), env=run_env)
    assert _inverted_indices(out) == list(range(60))
    assert report.timing("invert").frames == 60
    assert report.timing("invert").calls >= 60 / 3


def test_image_target_gives_an_image(run_env: RuntimeEnv, tmp_path: Path) -> None:
    import cv2

    src = tmp_path / "still.png"
    img = np.zeros((50, 70, 3), np.uint8)
    img[10:20, 10:30] = (255, 0, 0)
    cv2.imwrite(str(src), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    out = tmp_path / "still_out.png"
    report = run_render(RenderJob(target=src, output=out), env=run_env)
    written = cv2.imread(str(out))
    assert written is not None
    back = cv2.cvtColor(written, cv2.COLOR_BGR2RGB)
    assert np.array_equal(back, img)
    assert report.frames_out == 1


def test_preview_mode_renders_a_reduced_draft(run_env: RuntimeEnv, tmp_path: Path) -> None:
    src = tmp_path / "tall.mp4"
    synth_clip(src, width=960, height=720, fps=25, frames=6)
    out = tmp_path / "draft.mp4"
    run_render(RenderJob(target=src, output=out, mode="preview"), env=run_env)
    v = probe(out).video
    assert v is not None and v.height == 540 and v.width == 720 and v.frame_count == 6


@pytest.mark.parametrize(
    ("job_kwargs", "message"),
    [
        ({"start": 99.0}, "beyond the end"),
        ({"start": 1.0, "end": 0.5}, "not after"),
    ],
)
def test_bad_ranges_are_user_errors(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, job_kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        run_render(RenderJob(target=clip, output=tmp_path / "o.mp4", **job_kwargs), env=run_env)


def test_output_equal_to_input_is_refused(run_env: RuntimeEnv, clip: Path) -> None:
    size = clip.stat().st_size
    with pytest.raises(UserError, match="one of the inputs"):
        run_render(RenderJob(target=clip, output=clip), env=run_env)
    assert clip.stat().st_size == size


def test_output_equal_to_a_face_map_photo_is_refused(run_env: RuntimeEnv, tmp_path: Path) -> None:
    """A person's photo or their source photo is an input too (it was overwritten by an image
    render writing to it)."""
    import shutil

    from ffdesk.pipeline.job import FaceMapping
    from ffdesk.runtime.resources import resource_path

    person, face = tmp_path / "person.jpg", tmp_path / "face.jpg"
    shutil.copy(resource_path("sample", "astronaut.jpg"), person)
    shutil.copy(resource_path("sample", "grace_hopper.jpg"), face)
    target = resource_path("sample", "astronaut.jpg")
    for photo in (person, face):
        kept = photo.read_bytes()
        job = RenderJob(target=target, output=photo, face_map=(FaceMapping(person, (face,)),))
        with pytest.raises(UserError, match="one of the inputs"):
            run_render(job, env=run_env)
        assert photo.read_bytes() == kept


def test_no_file_a_render_writes_is_one_it_reads_or_another_it_writes(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--report` onto the target replaced the clip with the report's JSON, and
    `--telemetry-log` onto it emptied the clip before the render began; each is one line now,
    before anything is opened, and so is a report onto the output or two files on one path."""
    import shutil

    from ffdesk.cli import main

    target = tmp_path / "clip.mp4"
    shutil.copy(clip, target)
    kept = target.read_bytes()
    out, log = tmp_path / "out.mp4", tmp_path / "log.jsonl"
    base = ["render", "--target", str(target), "--output", str(out), "-q"]
    for extra, says in (
        (["--report", str(target)], "--report clip.mp4 is one of the inputs"),
        (["--telemetry-log", str(target)], "--telemetry-log clip.mp4 is one of the inputs"),
        (["--report", str(out)], "--report out.mp4 is also the output"),
        (
            ["--report", str(log), "--telemetry-log", str(log)],
            "--telemetry-log log.jsonl is also the --report",
        ),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert target.read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]
    voice = RenderJob(
        target=target,
        output=target.with_name("v.mp4"),
        lip_syncer="wav2lip_96",
        lip_sync_audio=target.with_name("v.mp4"),
    )
    with pytest.raises(UserError, match="output v.mp4 is one of the inputs"):
        run_render(voice, env=run_env)


def test_an_output_or_report_that_cannot_be_written_is_refused_before_rendering(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output that is a folder rendered every frame, then failed to move it into place (and
    left its parts folder); a report into a folder that is not there, or onto a folder, failed
    after the output was written (exit 2 with the output there). Each is one line now, and
    nothing is written."""
    from ffdesk.cli import main

    folder = tmp_path / "shot.mp4"
    folder.mkdir()
    out = tmp_path / "out.mp4"
    base = ["render", "--target", str(clip), "-q"]
    for extra, says in (
        (["--output", str(folder)], f"{folder} is a folder; the output is a file"),
        (["--output", str(out), "--report", str(tmp_path / "no" / "r.json")], "--report: "),
        (["--output", str(out), "--report", str(folder)], f"--report {folder} is a folder"),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.mp4"] and not any(folder.iterdir())


def test_png_frames_onto_a_file_are_refused_before_rendering(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path
) -> None:
    """`--encoder png` writes a folder: onto a file it rendered every frame, then failed to move
    the folder into place ("Not a directory")."""
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"a picture")
    with pytest.raises(UserError, match="--encoder png writes a folder of frames, and this is a file"):
        run_render(RenderJob(target=clip, output=photo, encoder="png"), env=run_env)
    assert photo.read_bytes() == b"a picture" and sorted(p.name for p in tmp_path.iterdir()) == ["photo.png"]


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ffdesk", *args], capture_output=True, text=True, **kw)


def test_kill_9_mid_render_then_rerun_resumes_with_every_frame_once(long_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed.mp4"
    cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(long_clip), "--output", str(out),
           "--segment-frames", "10", "-q", "--encoder", "h264"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = work_dir_for(out) / "manifest.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if manifest.exists() and manifest.read_text().count('"file"') >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists(), "the render finished before it could be killed"
    report_path = tmp_path / "report.json"
    done = _cli("render", "--target", str(long_clip), "--output", str(out), "--segment-frames", "10",
                "--report", str(report_path), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    report = json.loads(report_path.read_text())
    assert report["resumed_segments"] >= 2
    assert decoded_indices(out) == list(range(250))
    durations = audio_seconds(out)
    assert len(durations) == 2 and all(abs(d - 10.0) < 0.1 for d in durations)


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_text("this is not a video\n" * 20), ""),
    ],
    ids=["missing", "zero-byte", "text-named-mp4"],
)
def test_cli_bad_target_is_exit_2_with_one_line(tmp_path: Path, make: Any, fragment: str) -> None:
    target = tmp_path / "bad.mp4"
    make(target)
    r = _cli("render", "--target", str(target), "--output", str(tmp_path / "o.mp4"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.mp4" in lines[0] and fragment in lines[0].lower()
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o.mp4").exists()


def test_cli_truncated_mp4_is_exit_2(long_clip: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.mp4"
    data = long_clip.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    r = _cli("render", "--target", str(cut), "--output", str(tmp_path / "o.mp4"))
    assert r.returncode in (0, 2), r.stderr
    if r.returncode == 2:
        assert len(r.stderr.strip().splitlines()) == 1 and "cut.mp4" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_start_beyond_end_and_usage_errors(clip: Path, tmp_path: Path) -> None:
    r = _cli("render", "--target", str(clip), "--output", str(tmp_path / "o.mp4"), "--start", "30")
    assert r.returncode == 2 and "beyond the end" in r.stderr
    r = _cli("render", "--target", str(clip))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_ctrl_c_exits_130_with_nothing_at_the_output_and_resumes(long_clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "interrupted.mp4"
    cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(long_clip), "--output", str(out),
           "--segment-frames", "10", "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    manifest = work_dir_for(out) / "manifest.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (manifest.exists() and '"file"' in manifest.read_text()):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the render finished before the interrupt arrived")
    assert proc.returncode == 130 and "cancelled" in err and "Traceback" not in err
    assert not out.exists()
    done = _cli("render", "--target", str(long_clip), "--output", str(out), "--segment-frames", "10", "-q")
    assert done.returncode == 0, done.stderr
    assert decoded_indices(out) == list(range(250))


class CountingStage(SlowInvert):
    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(fail_at=fail_at)
        self.finished = 0

    def finish(self) -> None:
        self.finished += 1


def test_stages_are_finished_exactly_once_and_not_built_for_a_refused_job(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[CountingStage] = []

    def build(
        job: RenderJob, info: object = None, *, env: RuntimeEnv, share: object = None
    ) -> list[CountingStage]:
        assert env is run_env and share is None  # the render's context reaches the stage builder
        built.append(CountingStage(fail_at=job.batch if job.batch == 3 else None))
        return built[-1:]

    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", build)
    with pytest.raises(UserError, match="beyond the end"):
        run_render(
            RenderJob(target=clip, output=tmp_path / "a.mp4", sources=(clip,), start=99.0), env=run_env
        )
    assert built == []  # refused before any model was loaded
    report = run_render(RenderJob(target=clip, output=tmp_path / "b.mp4", sources=(clip,)), env=run_env)
    assert report.frames_out == 60 and built[-1].finished == 1
    with pytest.raises(RuntimeError, match="stage exploded"):
        run_render(RenderJob(target=clip, output=tmp_path / "c.mp4", sources=(clip,), batch=3), env=run_env)
    assert built[-1].finished == 1
