"""`ffdesk live` as a Deep-Live-Cam user met it: a take never recorded over, the face enhancer
live, a face map beside options it makes meaningless refused as a render refuses them, a
session that swapped nobody said so, a recording another process holds is busy (75), and a
face map's person numbers pointed at the listing of the same range."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import BUSY_EXIT
from ffdesk.pipeline.live import live_job, live_stages
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from tests.clip_writer import write_h264
from tests.faces.two_shot import two_shot

HOPPER = resource_path("sample", "grace_hopper.jpg")
ASTRONAUT = resource_path("sample", "astronaut.jpg")


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A session plays its clip once, in real time: 0.6 s of two people, 0.4 s of nobody."""
    folder = tmp_path_factory.mktemp("clips")
    grey = (np.full((96, 128, 3), 60 + 4 * i, np.uint8) for i in range(10))
    return {
        "two": two_shot(folder / "two.mp4", frames=15),
        "empty": write_h264(folder / "empty.mp4", grey, fps=25),
    }


def _live(clip: Path, *extra: str) -> list[str]:
    return ["live", "--camera", f"file:{clip}", "--seconds", "1.5", *extra]


def test_a_take_is_never_recorded_over(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    take = tmp_path / "take.mp4"
    take.write_bytes(b"an earlier take")
    assert main(_live(clips["two"], "--source", str(HOPPER), "--record", str(take))) == 0
    out, err = capsys.readouterr()
    assert take.read_bytes() == b"an earlier take"  # before: replaced without a word
    assert "take.mp4 is there (an earlier take): recording to take-2.mp4" in err
    assert f"recorded {tmp_path / 'take-2.mp4'}" in out and (tmp_path / "take-2.mp4").stat().st_size > 1000


def test_the_face_enhancer_runs_live(tmp_path: Path, run_env: RuntimeEnv) -> None:
    write_standins(tmp_path, ["gfpgan_1.4"])
    job = live_job([HOPPER], enhancer="gfpgan_1.4", models_dir=tmp_path)
    names = [stage.name for stage in live_stages(job, fps=25.0, env=run_env)]
    plain = [stage.name for stage in live_stages(live_job([HOPPER]), fps=25.0, env=run_env)]
    assert len(names) == len(plain) + 1 and "enhance" in names[-1], names


def test_the_enhancer_options_are_live_options(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_standins(tmp_path, ["gfpgan_1.4"])
    argv = _live(
        clips["two"], "--source", str(HOPPER), "--enhancer", "gfpgan_1.4", "--models-dir", str(tmp_path)
    )
    assert main([*argv, "--enhancer-blend", "60"]) == 0  # before: unrecognized arguments
    assert "frames out" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "named"),
    [(["--source", str(HOPPER)], "--source"), (["--face-selection", "all"], "--face-selection")],
)
def test_a_face_map_beside_what_it_makes_meaningless_is_refused(
    clips: dict[str, Path], extra: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_live(clips["two"], "--map", f"{ASTRONAUT}={HOPPER}", *extra)) == 2  # before: ran, ignored it
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{named} would be ignored beside it" in line


def test_a_session_that_swapped_nobody_says_so(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_live(clips["empty"], "--source", str(HOPPER))) == 0
    out, err = capsys.readouterr()
    assert "faces swapped in 0 of" in out
    assert "warning: no face was swapped in the " in err and "no face was found in them" in err
    assert main(_live(clips["two"], "--source", str(HOPPER))) == 0
    assert "no face was swapped" not in capsys.readouterr().err


def test_a_name_another_process_records_gets_the_next_number_and_a_render_of_it_is_busy(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.pipeline.live import claim_recording

    take = tmp_path / "take.mp4"
    lock = claim_recording(take)  # another session recording take.mp4 (not there until it ends)
    try:
        assert main(_live(clips["two"], "--source", str(HOPPER), "--record", str(take))) == 0
        out, err = capsys.readouterr()
        assert f"recorded {tmp_path / 'take-2.mp4'}" in out
        assert "take.mp4 is being written by another process: recording to take-2.mp4" in err
        render = ["render", "-t", str(clips["two"]), "-s", str(HOPPER), "-o", str(take), "--end", "0.2"]
        assert main(render) == BUSY_EXIT  # before: 2, as for a wrong job
        assert "is being recorded by process" in capsys.readouterr().err
    finally:
        lock.release()


def test_a_take_put_at_the_free_name_meanwhile_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name was chosen as the session started and locked seconds later, after the stages were
    built: a take another session moved there meanwhile was recorded over."""
    from ffdesk.pipeline import live

    (tmp_path / "take.mp4").write_bytes(b"take 1")
    claim = live.claim_recording

    def another_take_lands(path: Path, on_status: object = None) -> object:
        lock = claim(path)
        if path.name == "take-2.mp4":
            (tmp_path / "take-2.mp4").write_bytes(b"take 2, another session's")
        return lock

    monkeypatch.setattr(live, "claim_recording", another_take_lands)
    said: list[str] = []
    name, lock = live.claim_take(tmp_path / "take.mp4", said.append)
    lock.release()
    assert name == tmp_path / "take-3.mp4"
    assert said == ["take.mp4 is there (an earlier take): recording to take-3.mp4"]


def test_a_person_number_points_at_the_listing_of_the_same_range(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["render", "-t", str(clips["two"]), "-o", str(tmp_path / "o.mp4"), "--map", f"5={HOPPER}"]
    assert main([*argv, "--start", "0.52", "--end", "1"]) == 2  # (the clip's last two frames)
    assert "(see `ffdesk faces two.mp4 --start 0.52 --end 1`)" in capsys.readouterr().err


def test_the_enhancers_settings_are_checked_live_as_in_a_render(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_live(clips["two"], "--source", str(HOPPER), "--enhancer-blend", "60")) == 2
    assert "--enhancer-blend needs a face enhancer" in capsys.readouterr().err  # before: ignored
    write_standins(tmp_path, ["gfpgan_1.4"])
    enhancer = ["--enhancer", "gfpgan_1.4", "--models-dir", str(tmp_path), "--enhancer-weight", "0.9"]
    assert main(_live(clips["two"], "--source", str(HOPPER), *enhancer)) == 0
    assert "--enhancer-weight 0.9 changes nothing: gfpgan_1.4" in capsys.readouterr().err
    assert main(_live(clips["two"], "--source", str(HOPPER), "--models-dir", str(tmp_path / "no"))) == 2
    assert "no such folder" in capsys.readouterr().err  # before: the embedded swap, without a word
