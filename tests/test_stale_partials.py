"""A live recording killed outright (`kill -9`) left its hidden partial file beside the output
forever; the next session recording to that file now removes it, and never one a running
writer of that file holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path

import pytest

from ffdesk.errors import UserError
from ffdesk.media.atomic import temp_path_for
from ffdesk.media.capture import CapturedFrame
from ffdesk.media.stale_parts import partials_of, remove_stale_partials
from ffdesk.pipeline.live import open_writers, recording_in
from ffdesk.runtime.env import RuntimeEnv


class _Still:
    """A camera that is only a size and a rate (all `open_writers` reads of one)."""

    name = "still"
    fps = 30.0
    size = (64, 48)
    missed = 0

    def open(self) -> None:
        """Nothing to open."""

    def read(self) -> CapturedFrame | None:
        return None

    def close(self) -> None:
        """Nothing to close."""


def test_the_partials_of_an_output_are_named_as_its_writers_name_them(tmp_path: Path) -> None:
    out = tmp_path / "r.mp4"
    mine = [temp_path_for(out), temp_path_for(out)]
    others = ["r.mp4", ".r.partial-zz.mp4", ".r.partial-0123abcd.mkv", ".rr.partial-0123abcd.mp4",
              ".r.partial-0123abcd9.mp4", "r.partial-0123abcd.mp4"]  # fmt: skip
    for path in [*mine, *(tmp_path / n for n in others)]:
        path.write_bytes(b"x")
    (tmp_path / ".r.partial-0123abcd.mp4").symlink_to(tmp_path / "r.mp4")  # ffdesk makes no link
    assert partials_of(out) == sorted(mine)
    assert remove_stale_partials(out) == sorted(mine)
    assert not any(p.exists() for p in mine)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*others, ".r.partial-0123abcd.mp4"])


_RECORDER = textwrap.dedent(
    """
    import sys, time
    from contextlib import ExitStack
    from pathlib import Path
    from tests.test_stale_partials import _Still
    from ffdesk.pipeline.live import open_writers

    with ExitStack() as stack:
        open_writers(_Still(), stack, stream=None, virtual_camera=False, record=Path(sys.argv[1]))
        print("recording", flush=True)
        time.sleep(120)
    """
)


def test_a_killed_sessions_partial_goes_at_the_next_session(tmp_path: Path) -> None:
    record = tmp_path / "r.mp4"
    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-c", _RECORDER, str(record)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "recording"
        left = partials_of(record)
        assert len(left) == 1
        # while that session runs, its partial is its own: a second session takes the next name
        with ExitStack() as stack:
            writers = open_writers(_Still(), stack, stream=None, virtual_camera=False, record=record)
            assert recording_in(writers) == tmp_path / "r-2.mp4"
            assert all(p.exists() for p in left)
        assert partials_of(record) == left
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert partials_of(record) == left  # kill -9: nothing removed it
    said: list[str] = []
    with ExitStack() as stack:
        open_writers(_Still(), stack, stream=None, virtual_camera=False, record=record, on_status=said.append)
        assert [p for p in partials_of(record) if p not in left]  # this session's own
        assert not any(p.exists() for p in left)
    assert said == [f"removed {left[0].name}: left unfinished beside r.mp4 by a writer that was killed"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no frame: no file, no lock, no partial


def test_a_render_removes_the_partials_a_killed_writer_left_beside_its_output(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """A render holds its output's lock while its partial exists: once it has the lock, the
    partials beside its output are writers' killed outright, and it removes them."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob
    from tests.real_clips import carphone

    output = tmp_path / "out.mp4"
    stale = temp_path_for(output)
    stale.write_bytes(b"\0" * 4096)  # what a render or session killed by kill -9 leaves
    other = temp_path_for(tmp_path / "other.mp4")
    other.write_bytes(b"\0")  # another output's: not this render's to touch
    run_render(RenderJob(target=carphone(), output=output, end=0.2), env=run_env)
    assert output.is_file() and not stale.exists() and other.exists()
    assert partials_of(output) == []


def test_a_render_with_a_matte_clip_holds_the_matte_clips_lock_too(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """`--matte clip` writes a second file, the matte clip, at a partial path of its own: the
    render holds that path's lock as well, so another writer of the matte clip's path is refused
    while it runs (and could not take its partial for a killed writer's), and the partials a
    killed writer of that path left are removed."""
    from ffdesk.media.matte import matte_clip_path
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.resume import claim_output
    from ffdesk.runtime.resources import resource_path
    from tests.real_clips import carphone

    output = tmp_path / "x.mp4"
    matte = matte_clip_path(output)
    job = RenderJob(
        target=carphone(), output=output, sources=(resource_path("sample", "grace_hopper.jpg"),),
        matte="clip", end=0.2,
    )  # fmt: skip
    lock, _ = claim_output(matte)  # a live recording or render of x-matte.mp4, running
    try:
        with pytest.raises(UserError, match=r"x-matte.mp4 is being rendered by process"):
            run_render(job, env=run_env)
    finally:
        lock.release()
    assert not output.exists()
    stale = temp_path_for(matte)
    stale.write_bytes(b"\0" * 1024)
    run_render(job, env=run_env)
    assert output.is_file() and matte.is_file() and not stale.exists()
