"""A PNG render's output is a folder, and a folder may hold the user's files: a render replaces
only a folder that is new, empty, or holds nothing but an earlier PNG render's frames. One that
holds anything else (its own, or its matte clip's with `--matte clip`) is refused before anything
is rendered and left byte for byte as it was; a file put in it while the render runs is kept too
(the new frames go beside it, under a name the error gives). A PNG render's output never has a
clip or image suffix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main
from ffdesk.errors import MediaError, UserError
from ffdesk.farm.worker import FarmWorker, segment_dict
from ffdesk.media import atomic
from ffdesk.media.atomic import OwnEntry, atomic_output, foreign_entries, listed
from ffdesk.media.encode import png_folder_entry
from ffdesk.media.images import read_image
from ffdesk.media.matte import matte_clip_path
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import engine
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import join_planned, plan_segments, run_render
from ffdesk.pipeline.job import MatteKind, RenderJob
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.pipeline.resume import Manifest, work_dir_for
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

PHOTO = resource_path("sample", "grace_hopper.jpg")
END_S = 0.1  # 3 frames at 25 fps
FRAMES = ["frame_000000.png", "frame_000001.png", "frame_000002.png"]

Tree = dict[str, tuple[bytes | None, int]]
"""A folder's entries by path inside it: (bytes, or None for a folder; mtime in ns)."""


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short clip with a face in it, so `--matte clip` has something to write."""
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(path, width=240, height=136, fps=25, frames=8, face_image=face, gop=4)
    return path


def _job(clip: Path, out: Path, matte: MatteKind = "none", **extra: Any) -> RenderJob:
    """A PNG render of the clip's first frames: a swap with --matte clip, else frames as they are."""
    sources = (PHOTO,) if matte == "clip" else ()
    settings: dict[str, Any] = {"end": END_S, **extra}
    return RenderJob(target=clip, output=out, sources=sources, encoder="png", matte=matte, **settings)


def _users_folder(folder: Path) -> Tree:
    """A folder of the user's: a photo, a note in a subfolder, and a file named as a frame (which
    does not make it an earlier render's)."""
    (folder / "sub").mkdir(parents=True)
    (folder / "grace_hopper.jpg").write_bytes(PHOTO.read_bytes())
    (folder / "sub" / "a.txt").write_text("keep me")
    (folder / "frame_000000.png").write_bytes(b"not one of ours")
    return _tree(folder)


def _tree(folder: Path) -> Tree:
    return {
        str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def _no_rendering(monkeypatch: pytest.MonkeyPatch) -> list[ev.Event]:
    """Make loading the stages fail the test, and collect the render's events: a job refused up
    front emits none."""

    def boom(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the render started")

    monkeypatch.setattr(engine, "build_stages", boom)
    return []


def test_a_folder_of_the_users_files_is_refused_in_one_line_before_rendering(
    face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    photos = tmp_path / "photos"
    before = _users_folder(photos)
    argv = ["render", "-t", str(face_clip), "-o", str(photos), "--encoder", "png", "--end", str(END_S)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "photos: this folder holds other files (grace_hopper.jpg, sub/)" in err
    assert "give a new or empty folder, or one an earlier PNG render wrote" in err
    assert _tree(photos) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]  # no work folder, lock or frames


def test_a_matte_clip_folder_of_the_users_files_is_refused_before_rendering(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "pm"
    matte = matte_clip_path(out)
    matte.mkdir()
    (matte / "notes.txt").write_text("the user's")
    before = _tree(matte)
    events = _no_rendering(monkeypatch)
    with pytest.raises(
        UserError, match=r"pm-matte \(the matte clip's folder\): this folder holds other files"
    ):
        run_render(_job(face_clip, out, "clip"), events.append, env=run_env)
    assert events == [] and _tree(matte) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pm-matte"]


def test_a_folder_of_an_earlier_png_render_is_replaced(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """An editor renders again into the folder of an earlier render: its frames (and the cache a
    file browser left there) give way to the new ones, the output's and the matte clip's."""
    out = tmp_path / "pm"
    run_render(_job(face_clip, out, "clip", end=0.2), env=run_env)  # 5 frames
    for folder in (out, matte_clip_path(out)):
        assert len(list(folder.iterdir())) == 5
        (folder / ".DS_Store").write_bytes(b"Finder's")
    report = run_render(_job(face_clip, out, "clip"), env=run_env)
    assert report.frames_out == 3
    for folder in (out, matte_clip_path(out)):
        assert sorted(p.name for p in folder.iterdir()) == FRAMES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pm", "pm-matte"]


def test_an_empty_folder_takes_the_frames(face_clip: Path, tmp_path: Path, run_env: RuntimeEnv) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    run_render(_job(face_clip, out), env=run_env)
    assert sorted(p.name for p in out.iterdir()) == FRAMES


@pytest.mark.parametrize("name", ["pn.mp4", "frames.png", "x.MOV", "a.webm"])
def test_a_png_output_named_as_a_file_is_refused(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A folder named like a clip or a picture is refused, as prores is to a .mp4."""
    events = _no_rendering(monkeypatch)
    stem, suffix = name.rsplit(".", 1)
    says = (
        f"{name}: --encoder png writes a folder of frames and cannot be written to a "
        f"'.{suffix.lower()}' file; give a folder name, such as {stem}"
    )
    with pytest.raises(UserError) as err:
        run_render(_job(face_clip, tmp_path / name), events.append, env=run_env)
    assert str(err.value) == says
    assert events == [] and list(tmp_path.iterdir()) == []


def test_a_link_at_a_png_matte_folder_is_refused(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A link at the output itself is followed: the job's paths are resolved first.)"""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "pm-matte").symlink_to(elsewhere)
    _no_rendering(monkeypatch)
    with pytest.raises(UserError, match="pm-matte: the matte clip's folder is a symbolic link"):
        run_render(_job(face_clip, tmp_path / "pm", "clip"), env=run_env)


def test_a_folder_at_a_video_renders_matte_clip_is_refused(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matte clip of a .mp4 render is a file: a folder at its path fails up front, not after."""
    (tmp_path / "out-matte.mp4").mkdir()
    _no_rendering(monkeypatch)
    job = RenderJob(target=face_clip, output=tmp_path / "out.mp4", sources=(PHOTO,), matte="clip", end=END_S)
    with pytest.raises(
        UserError, match="out-matte.mp4 is a folder; the matte clip goes to this path as a file"
    ):
        run_render(job, env=run_env)


def _drop_on_start(folder: Path, name: str) -> Any:
    """An event callback that puts a file of the user's into `folder` once the render started."""

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Started):
            (folder / name).write_bytes(b"dropped while rendering")

    return on_event


def test_a_file_put_in_the_folder_during_the_render_is_kept(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    out = tmp_path / "photos"
    run_render(_job(face_clip, out, end=0.2), env=run_env)  # an earlier render's 5 frames
    earlier = _tree(out)
    with pytest.raises(MediaError) as err:
        run_render(_job(face_clip, out), _drop_on_start(out, "new.jpg"), env=run_env)
    kept = tmp_path / "photos-ffdesk-new"
    assert (
        str(err.value)
        == f"{out}: not replaced, it holds other files now (new.jpg); the new output is in {kept}"
    )
    assert (out / "new.jpg").read_bytes() == b"dropped while rendering"
    assert {k: v for k, v in _tree(out).items() if k != "new.jpg"} == earlier
    assert sorted(p.name for p in kept.iterdir()) == FRAMES
    assert work_dir_for(out).exists()  # the finished segments stay: run again to join them
    # once the file is moved away, the same render finishes from them
    (out / "new.jpg").rename(tmp_path / "new.jpg")
    report = run_render(_job(face_clip, out), env=run_env)
    assert report.resumed_segments == 1 and sorted(p.name for p in out.iterdir()) == FRAMES
    assert not work_dir_for(out).exists()


def test_a_file_put_in_the_matte_folder_during_the_render_is_kept(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    out = tmp_path / "pm"
    matte = matte_clip_path(out)
    matte.mkdir()
    with pytest.raises(MediaError, match=r"pm-matte: not replaced, it holds other files now \(notes.txt\)"):
        run_render(_job(face_clip, out, "clip"), _drop_on_start(matte, "notes.txt"), env=run_env)
    assert sorted(p.name for p in matte.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in (tmp_path / "pm-matte-ffdesk-new").iterdir()) == FRAMES
    assert sorted(p.name for p in out.iterdir()) == FRAMES  # the output went in first


def test_a_farm_join_checks_the_folder_up_front_and_as_it_replaces_it(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """The farm's head plans (the check before anything is sent out) and joins what the workers
    return (the check as the folder is replaced), both through the engine's own checks."""
    photos = tmp_path / "photos"
    before = _users_folder(photos)
    with pytest.raises(UserError, match="photos: this folder holds other files"):
        plan_segments(_job(face_clip, photos, segment_frames=2))
    assert _tree(photos) == before

    out = tmp_path / "frames"
    out.mkdir()
    plan = plan_segments(_job(face_clip, out, segment_frames=2))
    worker = FarmWorker("slot-0", None, use_gpu=False, env=run_env)
    try:
        returned = [worker.render(job_to_json(plan.job), segment_dict(s)) for s in plan.segments]
    finally:
        worker.close()
    from ffdesk.farm.head import write_returned

    (out / "mine.txt").write_text("put there while the farm rendered")
    manifest, _ = Manifest.open(work_dir_for(out), plan.job.output_fingerprint(), False)
    with manifest, pytest.raises(MediaError, match="frames: not replaced, it holds other files now"):
        for back in returned:
            manifest.add(write_returned(manifest.folder, plan, back))
        join_planned(plan, manifest)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert sorted(p.name for p in (tmp_path / "frames-ffdesk-new").iterdir()) == FRAMES


def _folder_with_frames(tmp_path: Path) -> Path:
    final = tmp_path / "frames"
    final.mkdir()
    (final / "frame_000000.png").write_bytes(b"old")
    return final


def test_a_file_put_in_the_folder_as_it_is_moved_aside_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is checked again once it is moved aside: a file that arrived in between goes
    back with it."""
    final = _folder_with_frames(tmp_path)
    looks: list[Path] = []

    def late_arrival(folder: Path, own: OwnEntry) -> list[str]:
        looks.append(folder)
        if len(looks) == 2:  # the second look, at the folder moved aside
            (folder / "late.txt").write_text("arrived")
        return foreign_entries(folder, own)

    monkeypatch.setattr(atomic, "foreign_entries", late_arrival)
    with (
        pytest.raises(MediaError, match=r"not replaced, it holds other files now \(late.txt\)"),
        atomic_output(final, own=png_folder_entry) as tmp,
    ):
        tmp.mkdir()
        (tmp / "frame_000000.png").write_bytes(b"new")
    assert looks[0] == final and looks[1].name.startswith(".frames.replaced-")
    assert sorted(p.name for p in final.iterdir()) == ["frame_000000.png", "late.txt"]
    assert (final / "frame_000000.png").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames", "frames-ffdesk-new"]


def test_a_file_put_in_the_replaced_folder_as_it_is_deleted_is_kept(tmp_path: Path) -> None:
    """The replaced folder loses only the frames, then goes with rmdir: a file that arrived after
    its last check survives, beside the new output, and the error says where."""
    final = _folder_with_frames(tmp_path)
    calls = 0

    def own(name: str) -> bool:
        nonlocal calls
        calls += 1
        if calls == 3:  # deleting the replaced folder's frames
            aside = next(p for p in tmp_path.iterdir() if p.name.startswith(".frames.replaced-"))
            (aside / "late.txt").write_text("arrived")
        return png_folder_entry(name)

    with (
        pytest.raises(MediaError, match="the new output is in place; late.txt, put in the old folder"),
        atomic_output(final, own=own) as tmp,
    ):
        tmp.mkdir()
        (tmp / "frame_000000.png").write_bytes(b"new")
    assert (final / "frame_000000.png").read_bytes() == b"new"
    previous = tmp_path / "frames-ffdesk-previous"
    assert sorted(p.name for p in previous.iterdir()) == ["late.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames", "frames-ffdesk-previous"]


def test_a_replace_stopped_half_way_puts_the_old_folder_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the old folder is moved aside: it goes back where it was, with what was put
    in it, and the name it had meanwhile is no partial output's (those are removed as a killed
    writer's by the next render of the same output)."""
    from ffdesk.media.stale_parts import partials_of

    final = _folder_with_frames(tmp_path)
    looks: list[Path] = []

    def interrupted(folder: Path, own: OwnEntry) -> list[str]:
        looks.append(folder)
        if len(looks) == 2:  # the second look, at the folder moved aside
            assert folder not in partials_of(final)
            (folder / "notes.txt").write_text("mine")
            raise KeyboardInterrupt
        return foreign_entries(folder, own)

    monkeypatch.setattr(atomic, "foreign_entries", interrupted)
    with pytest.raises(KeyboardInterrupt), atomic_output(final, own=png_folder_entry) as tmp:
        tmp.mkdir()
        (tmp / "frame_000000.png").write_bytes(b"new")
    assert sorted(p.name for p in final.iterdir()) == ["frame_000000.png", "notes.txt"]
    assert (final / "frame_000000.png").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


@pytest.mark.parametrize(
    ("target", "says"),
    [("pattern", r"^seq: this folder holds frame_%06d.png, which the render reads"),
     ("folder", r"^output seq is one of the inputs")],
)  # fmt: skip
def test_a_png_render_into_the_folder_of_its_own_frames_is_refused(
    face_clip: Path, tmp_path: Path, run_env: RuntimeEnv, target: str, says: str
) -> None:
    """A frame sequence's frames are named as a PNG render's: a render of them into their own
    folder would overwrite its input. Refused up front, the frames left as they were."""
    seq = tmp_path / "seq"
    run_render(_job(face_clip, seq), env=run_env)
    before = _tree(seq)
    given = seq / "frame_%06d.png" if target == "pattern" else seq
    with pytest.raises(UserError, match=says):
        run_render(RenderJob(target=given, output=seq, sources=(PHOTO,), encoder="png", fps=25), env=run_env)
    assert _tree(seq) == before


def test_the_kept_folder_takes_a_free_name(tmp_path: Path) -> None:
    final = _folder_with_frames(tmp_path)
    (final / "mine.txt").write_text("x")
    (tmp_path / "frames-ffdesk-new").mkdir()
    with (
        pytest.raises(MediaError, match="frames-ffdesk-new-2"),
        atomic_output(final, own=png_folder_entry) as tmp,
    ):
        tmp.mkdir()
    assert sorted(p.name for p in (tmp_path / "frames-ffdesk-new").iterdir()) == []
    assert (tmp_path / "frames-ffdesk-new-2").is_dir() and (final / "mine.txt").exists()


def test_what_a_png_render_folder_may_hold() -> None:
    for name in ("frame_000000.png", "frame_1234567.png", ".DS_Store", "Thumbs.db"):
        assert png_folder_entry(name), name
    for name in ("frame_1.png", "frame_000000.jpg", "grace_hopper.jpg", "frame_000000.png.bak", "a.txt"):
        assert not png_folder_entry(name), name


def test_a_long_list_of_other_files_is_cut_short() -> None:
    assert listed(["a.jpg", "b.txt"]) == "a.jpg, b.txt"
    assert listed(["a.jpg", "b.txt", "c/", "d.mov", "e.wav"]) == "a.jpg, b.txt, c/ and 2 more"
