"""The background face scan: which frames of a clip have no face."""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
from skimage.data import astronaut

from ffdesk.faces import scan
from ffdesk.faces.scan import ScanPoint, keyframe_interval, sampled_frames, scan_clip, stride_for
from ffdesk.media.synth import synth_clip
from ffdesk.types import Frame


@pytest.fixture(scope="module")
def faceless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scan") / "pattern.mp4"
    synth_clip(path, width=160, height=96, fps=10.0, frames=30)
    return path


@pytest.fixture(scope="module")
def with_face(tmp_path_factory: pytest.TempPathFactory) -> Path:
    face = np.ascontiguousarray(cv2.resize(astronaut()[0:300, 120:400], (70, 75)))
    path = tmp_path_factory.mktemp("scan") / "face.mp4"
    synth_clip(path, width=160, height=96, fps=12.0, frames=12, face_image=face)
    return path


def test_stride_keeps_a_scan_within_its_samples() -> None:
    assert stride_for(1) == stride_for(600) == 1
    assert stride_for(601) == 2
    assert stride_for(15000) == 25
    assert stride_for(0) == 1


def test_every_sampled_frame_is_reported_once_in_order(faceless: Path) -> None:
    seen: list[Frame] = []

    def count(image: Frame) -> int:
        seen.append(image)
        return len(seen) % 2

    batches: list[list[ScanPoint]] = []
    looked = scan_clip(faceless, 30, batches.append, threading.Event(), detector=count, max_samples=10)
    points = [p for b in batches for p in b]
    assert looked == 10 == len(seen)
    assert [p.index for p in points] == list(range(0, 30, 3))
    assert [p.faces for p in points] == [1, 0] * 5
    assert {p.span for p in points} == {3}
    assert seen[0].shape == (96, 160, 3)


def test_a_stopped_scan_reports_nothing_more(faceless: Path) -> None:
    stop = threading.Event()
    batches: list[list[ScanPoint]] = []

    def count(_image: Frame) -> int:
        stop.set()
        return 0

    scan_clip(faceless, 30, batches.append, stop, detector=count)
    assert batches == []


def test_the_embedded_detector_finds_the_face_and_the_empty_frames(faceless: Path, with_face: Path) -> None:
    empty: list[ScanPoint] = []
    scan_clip(faceless, 30, empty.extend, threading.Event())
    assert len(empty) == 30 and all(p.faces == 0 for p in empty)
    found: list[ScanPoint] = []
    scan_clip(with_face, 12, found.extend, threading.Event())
    assert len(found) == 12 and all(p.faces >= 1 for p in found)


@pytest.fixture(scope="module")
def short_gop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scan") / "gop5.mp4"
    synth_clip(path, width=96, height=64, fps=25.0, frames=200, gop=5)
    return path


def test_the_keyframe_gap_is_read_from_the_packets(short_gop: Path, faceless: Path, tmp_path: Path) -> None:
    assert keyframe_interval(short_gop) == 5
    assert keyframe_interval(faceless) > 30  # one keyframe in its 30 frames
    (tmp_path / "not.mp4").write_bytes(b"nothing")
    assert keyframe_interval(tmp_path / "not.mp4") == 1


def _converted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from ffdesk.media import decode

    calls: list[int] = []
    convert = decode.rgb_array

    def counted(*args: object, **kwargs: object) -> Frame:
        calls.append(1)
        return convert(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(decode, "rgb_array", counted)
    return calls


def test_a_long_stride_seeks_its_samples_instead_of_decoding_every_frame(
    short_gop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every frame of the clip was decoded and turned into RGB to look at one in `stride`: hours
    # of CPU in the background for a feature-length clip
    stop = threading.Event()
    decoded = _converted(monkeypatch)
    every = list(sampled_frames(short_gop, 20, stop, frame_count=200, keyframes_every=10**6))
    assert len(decoded) == 200
    decoded.clear()
    sought = list(sampled_frames(short_gop, 20, stop, frame_count=200))
    assert len(decoded) == 10
    assert [i for i, _ in sought] == [i for i, _ in every] == list(range(0, 200, 20))
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(sought, every, strict=True))


def test_a_slow_seek_hands_the_rest_to_frame_by_frame_decoding(
    short_gop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "SLOW_SEEK_S", 0.0)  # the first seek already counts as slow
    frames = list(sampled_frames(short_gop, 20, threading.Event(), frame_count=200))
    assert [i for i, _ in frames] == list(range(0, 200, 20))


def test_a_stride_shorter_than_the_keyframe_gap_decodes_frame_by_frame(
    faceless: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded = _converted(monkeypatch)
    frames = list(sampled_frames(faceless, 10, threading.Event(), frame_count=30))
    assert [i for i, _ in frames] == [0, 10, 20] and len(decoded) == 30


def test_a_variable_rate_clip_is_sampled_at_the_timelines_own_frame_numbers(tmp_path: Path) -> None:
    # the scan numbered frames by time x average rate: on a variable-rate clip its "no face"
    # marks landed on other frames than the timeline's (which counts real frames)
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.preview import frame_clock

    clip = tmp_path / "vfr.mp4"
    synth_clip(clip, width=96, height=64, fps=25.0, frames=30, vfr=True)
    video = probe(clip).video
    assert video is not None and video.vfr
    clock = frame_clock(clip, video)
    assert len(clock.times) == 30
    indices = [i for i, _ in sampled_frames(clip, 1, threading.Event(), frame_count=30, frames=clock)]
    assert indices == list(range(30))
