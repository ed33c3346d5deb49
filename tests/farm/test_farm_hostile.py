"""The farm against what studios give it: a port that is not a Ray head's, tokens from every
place Ray reads them, a head stopped by SIGTERM, a source photo without a face, an image sequence
with nothing shared, and what a render leaves on the nodes' disks.

The tests here never start Ray; those that need a real local cluster (tokens, SIGTERM, a faceless
source photo, scratch folders) are in test_farm.py, whose one cluster runs every farm scenario."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.farm.address import FarmAddress, check_reachable
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import work_dir_for

pytest.importorskip("ray")

from ffdesk.farm.head import FarmOptions, run_farm_render  # noqa: E402

_SETTINGS = bytes.fromhex("000000040000000000")


def _serve(answer: bytes | None) -> Iterator[str]:
    """A loopback server that answers each connection with `answer` (None: never answers)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

    thread = threading.Thread(target=accept, name="fake-head")
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def http_server() -> Iterator[str]:
    yield from _serve(b"HTTP/1.0 400 Bad Request\r\n\r\n")


@pytest.fixture
def silent_server() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture
def grpc_like_server() -> Iterator[str]:
    yield from _serve(_SETTINGS)


def test_a_port_that_is_not_a_ray_heads_is_refused_in_one_line(http_server: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(UserError) as refused:
        check_reachable(FarmAddress(http_server), timeout_s=2)
    assert time.monotonic() - t0 < 3
    assert str(refused.value) == (
        f"cannot reach the farm at {http_server}: this port is not a Ray head's "
        "(it does not answer as Ray's GCS does)"
    )


def test_a_port_that_never_answers_is_refused_after_the_timeout(silent_server: str) -> None:
    with pytest.raises(UserError, match=r"^cannot reach the farm at .*: no answer within 0\.5 s$"):
        check_reachable(FarmAddress(silent_server), timeout_s=0.5)


def test_a_port_that_answers_as_grpc_does_is_taken(grpc_like_server: str) -> None:
    check_reachable(FarmAddress(grpc_like_server), timeout_s=2)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(120)
def test_a_farm_render_that_fails_before_any_segment_leaves_no_work_folder(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=48, frames=4)
    job = RenderJob(target=clip, output=tmp_path / "out.mov", encoder="prores")
    with pytest.raises(UserError, match="cannot reach the farm"):
        run_farm_render(job, FarmAddress(f"127.0.0.1:{_dead_port()}"))
    assert not work_dir_for(job.output).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]


@pytest.mark.timeout(120)
def test_an_image_sequence_with_the_clip_shipped_is_refused_in_one_line(tmp_path: Path) -> None:
    import cv2

    frames = tmp_path / "shot"
    frames.mkdir()
    for i in range(3):
        cv2.imwrite(str(frames / f"f{i:04d}.png"), np.full((48, 64, 3), 40 * i, np.uint8))
    job = RenderJob(target=frames, output=tmp_path / "out.mov", encoder="prores")
    with pytest.raises(UserError) as refused:
        run_farm_render(job, FarmAddress(f"127.0.0.1:{_dead_port()}"), options=FarmOptions(ship_source=True))
    assert str(refused.value) == (
        "shot: an image sequence cannot be shipped to the workers (render it with --farm-storage shared)"
    )
    assert not work_dir_for(job.output).exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--height", "0"), "--height 0: the clip needs at least 2 rows"),
        (("--height", "-4"), "--height -4: the clip needs at least 2 rows"),
        (("--wait-ms", "-1"), "--wait-ms -1: give milliseconds a frame, 0 or more"),
        (("--wait-ms", "nan"), "--wait-ms nan: give milliseconds a frame, 0 or more"),
    ],
)
def test_bench_farm_refuses_a_clip_or_wait_it_cannot_use_in_one_line(
    option: tuple[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.cli import main

    assert main(["bench", "farm", "--workers", "1", "--frames", "4", *option]) == 2
    assert capsys.readouterr().err.strip() == f"ffdesk: error: {message}"
