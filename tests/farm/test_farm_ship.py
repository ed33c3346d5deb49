"""Without shared storage the head ships each segment's part of the clip: a remux of its packets
that keeps the clip's timestamps, from which a worker that cannot see the clip renders the same
segment, byte for byte."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import av
import pytest

from ffdesk.errors import UserError
from ffdesk.farm.ship import _check_same, cut_range, lead_range, sent_job
from ffdesk.farm.worker import FarmWorker, segment_dict
from ffdesk.media.probe import probe
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import plan_segments
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.runtime.env import RuntimeEnv

from .test_farm_resident import pack_plan


def _stamps(path: Path) -> list[tuple[int | None, int | None]]:
    with av.open(str(path)) as c:
        return [(p.pts, p.dts) for p in c.demux(video=0) if p.size]


def test_a_cut_holds_the_clips_own_packets_from_the_keyframe_before_the_segment(tmp_path: Path) -> None:
    clip = tmp_path / "turned.mp4"
    synth_clip(clip, width=96, height=64, fps=25, frames=40, gop=10, rotation=90)
    plan = plan_segments(RenderJob(target=clip, output=tmp_path / "o.mov", segment_frames=8, resume=False))
    seg = plan.segments[2]  # frames 16-23: the keyframe before is frame 10
    cut = cut_range(plan, seg, seg)
    path = tmp_path / f"cut{cut.suffix}"
    path.write_bytes(cut.data)
    assert probe(path).video.rotation == 90  # type: ignore[union-attr]
    stamps, source = _stamps(path), _stamps(clip)
    assert stamps == source[source.index(stamps[0]) : source.index(stamps[0]) + len(stamps)]
    assert stamps[0][0] is not None and stamps[0][0] <= seg.first_pts
    assert abs(cut.shift_s - 10 / 25) < 1e-9
    assert max(p for p, _ in stamps if p is not None) >= seg.last_pts


def test_a_worker_that_cannot_see_the_clip_renders_the_shipped_segments_identically(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    plan = pack_plan(face_clip, small_pack, tmp_path / "out.mov")
    shared = FarmWorker("shared", None, use_gpu=False, env=run_env)
    shipped = FarmWorker("shipped", None, use_gpu=False, env=run_env)
    elsewhere = sent_job(plan.job)  # the clip's and photo's names in a folder that exists nowhere
    lead = lead_range(plan)
    try:
        with pytest.raises(UserError, match="cannot see /ffdesk-shipped/face.mp4"):
            shipped.check(job_to_json(elsewhere))
        shipped.check(job_to_json(elsewhere), lead=lead)
        for seg in plan.segments:
            here = shared.render(job_to_json(plan.job), segment_dict(seg))
            there = shipped.render(
                job_to_json(elsewhere), segment_dict(seg), shipped=cut_range(plan, seg, seg), lead=lead
            )
            assert here.read_from == str(face_clip) and there.read_from != str(face_clip)
            assert Path(there.read_from).name.startswith("source") and not Path(there.read_from).exists()
            assert there.files == here.files, f"segment {seg.number} differs"
        assert shipped.model_loads == shared.model_loads > 0
    finally:
        shared.close()
        shipped.close()


def test_a_cut_that_does_not_keep_the_stream_is_refused(tmp_path: Path) -> None:
    clip = tmp_path / "c.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=4)
    info = probe(clip)
    assert info.video is not None
    _check_same(clip, info.video, info)
    with pytest.raises(UserError, match="does not keep its time_base, fps: it cannot be shipped"):
        _check_same(clip, replace(info.video, time_base=info.video.time_base / 2, fps=30.0), info)


@pytest.mark.parametrize("name", ["clip.mkv", "clip.ts", "clip.mov"])
def test_other_containers_ship_their_segments_identically(
    name: str, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    clip = tmp_path / name
    synth_clip(clip, width=96, height=64, fps=25, frames=32, gop=10)
    plan = plan_segments(
        RenderJob(target=clip, output=tmp_path / "o.mov", encoder="prores", segment_frames=8)
    )
    shared = FarmWorker("shared", None, use_gpu=False, env=run_env)
    shipped = FarmWorker("shipped", None, use_gpu=False, env=run_env)
    try:
        lead = lead_range(plan)
        for seg in plan.segments[1:]:  # an MPEG-TS seek lands after the frame: the cut starts earlier
            here = shared.render(job_to_json(plan.job), segment_dict(seg))
            there = shipped.render(
                job_to_json(sent_job(plan.job)),
                segment_dict(seg),
                shipped=cut_range(plan, seg, seg),
                lead=lead,
            )
            assert there.files == here.files, f"segment {seg.number} differs"
    finally:
        shared.close()
        shipped.close()


def test_a_clip_whose_cut_moves_its_timestamps_is_refused_in_one_line(tmp_path: Path) -> None:
    clip = tmp_path / "clip.avi"  # AVI keeps no timestamps of its own: a remux renumbers them
    synth_clip(clip, width=64, height=48, fps=25, frames=32, gop=10, codec="mpeg4")
    plan = plan_segments(
        RenderJob(target=clip, output=tmp_path / "o.mov", encoder="prores", segment_frames=8)
    )
    with pytest.raises(
        UserError, match=r"^clip.avi: a cut of this clip moves its timestamps: it cannot be shipped"
    ):
        cut_range(plan, plan.segments[2], plan.segments[2])  # from the keyframe at frame 10


def test_a_clip_that_cannot_be_shipped_is_refused_before_the_farm_is_contacted(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import FarmOptions, run_farm_render

    clip = tmp_path / "clip.avi"
    synth_clip(clip, width=64, height=48, fps=25, frames=32, gop=10, codec="mpeg4")
    job = RenderJob(target=clip, output=tmp_path / "o.mov", encoder="prores", segment_frames=8)
    nobody = parse_farm("127.0.0.1:9")  # nothing listens there: contacting it would fail differently
    with pytest.raises(UserError, match="moves its timestamps"):
        run_farm_render(job, nobody, options=FarmOptions(ship_source=True))
    assert not (tmp_path / "o.mov").exists()


def test_a_prores_4444_clip_ships_as_itself(tmp_path: Path) -> None:
    """A cut keeps the clip's own codec tag: ProRes 4444 (`ap4h`) stays 4444, not the 422 HQ
    (`apch`) a copied stream is tagged by default, which decoded as another pixel format and was
    refused; keyed footage keeps its alpha on a worker without shared storage."""
    import numpy as np

    clip = tmp_path / "keyed.mov"
    with av.open(str(clip), "w") as out:
        stream = out.add_stream("prores_ks", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuva444p10le"
        stream.options = {"profile": "4444", "g": "8"}
        for i in range(16):
            rgba = np.full((48, 64, 4), (20 * (i % 8), 90, 160, 128), np.uint8)
            frame = av.VideoFrame.from_ndarray(rgba, format="rgba").reformat(format="yuva444p10le")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    plan = plan_segments(
        RenderJob(target=clip, output=tmp_path / "o.mov", encoder="prores", segment_frames=8)
    )
    cut = cut_range(plan, plan.segments[1], plan.segments[1])  # refused before: "does not keep its pix_fmt"
    shipped = tmp_path / f"shipped{cut.suffix}"
    shipped.write_bytes(cut.data)
    with av.open(str(clip)) as whole, av.open(str(shipped)) as part:
        assert part.streams.video[0].codec_context.codec_tag == whole.streams.video[0].codec_context.codec_tag
        assert part.streams.video[0].format.name == whole.streams.video[0].format.name
