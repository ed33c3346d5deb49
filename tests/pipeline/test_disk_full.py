"""A disk that fills up mid-render, for real: a small tmpfs in a private mount namespace.

The render must stop with one line naming the file it could not write, leave nothing at the output
path, and the same command must resume and finish once space is freed. Needs root (or a user
namespace) for `unshare -m` and `mount -t tmpfs`; skipped where they are not permitted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ffdesk.media.synth import synth_clip

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = r"""
import json, os, shutil, subprocess, sys
from pathlib import Path
import av
from ffdesk.media.synth import frame_index_of

src, mnt, kind, amount = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
result = Path(sys.argv[5])
out = mnt / "out.mp4"
filler = mnt / "filler"
if kind == "bytes":
    filler.write_bytes(b"\0" * amount)
else:  # leave `amount` free inodes: a disk out of inodes says ENOSPC too
    filler.mkdir()
    for i in range(os.statvfs(mnt).f_ffree - 1 - amount):
        (filler / str(i)).touch()
cmd = [sys.executable, "-m", "ffdesk", "render", "--target", src, "--output", str(out),
       "--segment-frames", "20", "--quality", "95", "-q"]
first = subprocess.run(cmd, capture_output=True, text=True)
listing = sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*") if p.parent != filler)
shutil.rmtree(filler) if filler.is_dir() else filler.unlink()
report = result.with_name("report.json")
second = subprocess.run([*cmd, "--report", str(report)], capture_output=True, text=True)
indices = []
if out.exists():
    with av.open(str(out)) as c:
        indices = [frame_index_of(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
result.write_text(json.dumps({
    "first_rc": first.returncode, "first_err": first.stderr, "listing": listing,
    "second_rc": second.returncode, "second_err": second.stderr, "indices": indices,
    "report": json.loads(report.read_text()) if report.exists() else None,
    "left": sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*")),
}))
"""

FRAMES = 200


@dataclass(frozen=True)
class Phase:
    """How the tmpfs is made and filled, and how many segments the first run must have finished."""

    mount: str
    filler: str
    amount: int
    finished: int


# At --quality 95 the 200 frames take about 1.15 MB in 10 segments and as much again joined.
PHASES = {
    "segments": Phase("size=4194304", "bytes", 3_500_000, 4),  # ~0.7 MB left: out while encoding
    "join": Phase("size=4194304", "bytes", 2_700_000, 10),  # ~1.5 MB left: out while joining
    "inodes": Phase("size=8388608,nr_inodes=64", "inodes", 6, 2),  # out of inodes at a manifest save
}


def _can_mount_tmpfs(where: Path) -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare command"
    where.mkdir(exist_ok=True)
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1M tmpfs '{where}' && touch '{where}/x'"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return (
            f"cannot mount a tmpfs in a private mount namespace: {probe.stderr.strip() or probe.returncode}"
        )
    return None


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("disk-full") / "src.mp4"
    synth_clip(path, width=320, height=180, fps=25, frames=FRAMES, crf=40, audio_streams=1)
    return path


@pytest.fixture(scope="module", params=sorted(PHASES))
def outcome(request: pytest.FixtureRequest, source: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp(f"full-{request.param}")
    mnt = base / "small"
    why = _can_mount_tmpfs(mnt)
    if why:
        pytest.skip(why)
    result = base / "result.json"
    script = base / "scenario.py"
    script.write_text(SCENARIO)
    phase = PHASES[request.param]
    inner = (
        f"mount -t tmpfs -o {phase.mount} tmpfs '{mnt}' && "
        f"'{sys.executable}' '{script}' '{source}' '{mnt}' {phase.filler} {phase.amount} '{result}'"
    )
    # module-scoped, so set up before the per-test home folders: give the renders their own
    env = {**os.environ, **{f"XDG_{k}_HOME": str(base / k.lower()) for k in ("CACHE", "DATA", "CONFIG")}}
    run = subprocess.run(
        ["unshare", "-m", "sh", "-c", inner], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0 and result.exists(), run.stderr
    return request.param, json.loads(result.read_text())


def test_a_full_disk_stops_the_render_in_one_line_and_the_same_command_resumes(outcome: Any) -> None:
    phase, r = outcome
    assert r["first_rc"] == 2, r["first_err"]
    lines = r["first_err"].strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r["first_err"], r["first_err"]
    line = lines[0]
    assert "disk full while writing" in line and "No space left on device" in line, line
    written = re.search(r"while writing (\S+)", line)
    assert written is not None
    if phase == "segments":
        # the segment being encoded, or the manifest saved after one: which write meets the
        # limit first depends on a few hundred bytes of x264's output
        assert re.search(r"\.out\.mp4\.ffdesk-parts/(seg\d+\.mp4|manifest\.json)$", written.group(1)), line
    elif phase == "inodes":
        assert written.group(1).endswith(".out.mp4.ffdesk-parts/manifest.json"), line
    # nothing at the output path, no partial file beside it; the finished segments are kept
    assert "out.mp4" not in r["listing"] and not [n for n in r["listing"] if ".partial" in n], r["listing"]
    assert any(n.startswith(".out.mp4.ffdesk-parts/seg") for n in r["listing"]), r["listing"]
    # space freed: the same command finishes, reusing what was done, with every frame once
    assert r["second_rc"] == 0, r["second_err"]
    assert r["report"]["resumed_segments"] >= PHASES[phase].finished
    assert r["indices"] == list(range(FRAMES))
    assert r["left"] == ["out.mp4"]


def test_the_disk_full_line_says_how_much_space_the_render_needs(outcome: Any) -> None:
    phase, r = outcome
    if phase == "inodes":
        assert re.search(r"has \d+ free inodes left", r["first_err"]), r["first_err"]
        return
    size = r"\d+(\.\d+)?\s*(bytes|[kMG]i?B)\b"
    need = re.search(rf"needs about {size} free in \S+", r["first_err"]) or re.search(
        rf"ran out of space \({size} free now\); the rest of the render takes at least about {size}",
        r["first_err"],
    )  # the second where what the rest takes is less than what is free by then
    assert need, r["first_err"]
    assert ".partial" not in r["first_err"], r["first_err"]  # the output's name, never its temp file


def test_a_manifest_save_on_a_full_disk_is_one_line_and_keeps_the_previous_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from ffdesk.errors import MediaError
    from ffdesk.media import atomic
    from ffdesk.pipeline import resume
    from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for

    folder = work_dir_for(tmp_path / "o.mp4")
    m, _ = Manifest.open(folder, "fp", resume=True)
    (folder / "seg00000.mp4").write_bytes(b"x")
    m.add(Segment(0, "seg00000.mp4", 1, 0, 0))
    before = (folder / resume.MANIFEST_NAME).read_text()

    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)  # the new manifest's bytes cannot be made durable
    (folder / "seg00001.mp4").write_bytes(b"y")
    with pytest.raises(
        MediaError, match=r"disk full while writing .*manifest\.json \(No space left on device\)"
    ):
        m.add(Segment(1, "seg00001.mp4", 1, 1, 1))
    assert (folder / resume.MANIFEST_NAME).read_text() == before
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "seg00000.mp4", "seg00001.mp4"]
    m.close()


def test_the_disk_full_line_never_asks_for_less_than_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the estimate of what the rest takes is below what is free by the time the error is
    reported (another writer, a quota), the line says the space ran out, not "needs 3 MiB (8 MiB
    free)"."""
    import shutil
    from collections import namedtuple

    from ffdesk.pipeline import engine
    from ffdesk.pipeline.resume import Manifest, work_dir_for

    usage = namedtuple("usage", "total used free")
    m, _ = Manifest.open(work_dir_for(tmp_path / "o.mp4"), "fp", resume=True)
    span = engine._Range(None, None, 100)
    try:
        monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10 * 2**30, 0, 8 * 2**20))
        line = engine._room_to_finish(m, span, 3 * 2**20, tmp_path)
        assert "ran out of space (8.0 MiB free now)" in line and "needs" not in line, line
        monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10 * 2**30, 0, 2**20))
        line = engine._room_to_finish(m, span, 3 * 2**20, tmp_path)
        assert "needs about" in line and "(1.0 MiB free now)" in line, line
    finally:
        m.close()
