"""An HDR10 master's static metadata (the mastering display's colour volume and the content light
levels) is carried into an H.265 render: it was dropped, and a grade's HDR display tone-maps
by it."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.hdr import HdrMetadata, _mastering, x265_params
from ffdesk.media.probe import probe
from tests.clip_writer import rgb_frames, write_frames

MASTER = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50)"
LIGHT = "1000,400"


def _hdr10_clip(path: Path) -> Path:
    def bt2020_pq(stream: av.VideoStream) -> None:
        cc = stream.codec_context
        cc.color_primaries, cc.color_trc, cc.colorspace = 9, 16, 9  # BT.2020, PQ, BT.2020 NCL

    images = [np.full((96, 128, 3), 60 * i, np.uint8) for i in range(4)]
    params = {"x265-params": f"log-level=error:master-display={MASTER}:max-cll={LIGHT}"}
    return write_frames(
        path,
        rgb_frames(images),
        codec="libx265",
        pix_fmt="yuv420p10le",
        options=params,
        stream_setup=bt2020_pq,
    )


def test_the_side_data_reads_as_x265_writes_it() -> None:
    # FFmpeg's struct: R, G, B primaries and the white point as x, y rationals, min and max
    # luminance, then the two "set" flags
    values = [34000, 50000, 16000, 50000, 13250, 50000, 34500, 50000, 7500, 50000, 3000, 50000,
              15635, 50000, 16450, 50000, 50, 10000, 10000000, 10000, 1, 1]  # fmt: skip
    assert _mastering(struct.pack("<22i", *values)) == MASTER
    assert _mastering(struct.pack("<22i", *values[:-1], 0)) is None  # luminance not set
    assert x265_params(HdrMetadata(MASTER, LIGHT)) == [f"master-display={MASTER}", f"max-cll={LIGHT}"]


def test_an_hdr10_master_keeps_its_metadata_through_an_h265_render(tmp_path: Path) -> None:
    source = _hdr10_clip(tmp_path / "pq.mp4")
    v = probe(source).video
    assert v is not None and (v.master_display, v.max_cll) == (MASTER, LIGHT)
    out = tmp_path / "out.mp4"
    assert main(["render", "-q", "-t", str(source), "-o", str(out), "--encoder", "h265"]) == 0
    w = probe(out).video
    assert w is not None and (w.master_display, w.max_cll) == (MASTER, LIGHT)  # was (None, None)
    assert (w.pix_fmt, w.color_trc) == ("yuv420p10le", v.color_trc)


def test_an_encoder_that_drops_it_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _hdr10_clip(tmp_path / "pq.mp4")
    render = ["render", "-q", "-t", str(source)]
    assert main([*render, "-o", str(tmp_path / "o.mov"), "--encoder", "prores"]) == 0
    assert "prores_ks does not write HDR10's mastering display and light levels" in capsys.readouterr().err
    assert main([*render, "-o", str(tmp_path / "o.mp4"), "--encoder", "h265"]) == 0
    assert "HDR10" not in capsys.readouterr().err
