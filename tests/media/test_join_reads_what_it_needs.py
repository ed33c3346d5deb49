"""A trimmed render's join reads the source's audio up to the range's end, not to the file's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import pytest

from ffdesk import cli
from ffdesk.media import segments
from ffdesk.media.synth import synth_clip


def test_a_trim_near_the_start_of_a_long_clip_stops_reading_its_audio_past_the_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the join demuxed every audio packet of the source to its end: a 5 s trim of a 3-hour clip
    # read the whole file (tens of GB off a share) to keep 5 s of sound
    clip = synth_clip(tmp_path / "long.mp4", width=64, height=48, fps=25.0, seconds=30, audio_streams=1).path
    fed: list[float] = []
    feed = segments._CopyTrack.feed

    def counted(self: segments._CopyTrack, packet: av.Packet) -> list[Any]:
        fed.append(float((packet.pts or 0) * (packet.time_base or 0)))
        return list(feed(self, packet))

    monkeypatch.setattr(segments._CopyTrack, "feed", counted)
    out = tmp_path / "trim.mp4"
    assert (
        cli.main(
            ["render", "-t", str(clip), "-o", str(out), "--start", "1", "--end", "2", "--no-resume", "-q"]
        )
        == 0
    )
    assert fed and max(fed) < 2 + segments._PAST_END_S + 1.0  # not the clip's 30 s
    from ffdesk.media.probe import probe

    audio = probe(out).audio
    assert audio and audio[0].duration_s == pytest.approx(1.0, abs=0.05)  # the sound kept is whole
