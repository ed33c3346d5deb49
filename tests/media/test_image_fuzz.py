"""A seeded fuzzer over images given to ffdesk: real photos (the bundled Grace Hopper and astronaut
JPEGs, and the same as PNG) with their bytes flipped, ranges zeroed, the file cut, or the size
fields of their headers set to other numbers (huge, zero, negative as unsigned), used as a source
photo and as the target of a render. Every case ends in a render or a one-line refusal (exit 2):
never a traceback, an internal error, or a decoder asked for gigabytes."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.synth import synth_clip
from ffdesk.runtime.resources import resource_path

CASES = 30


def _photos() -> list[bytes]:
    """The two bundled photos, as JPEG and as PNG."""
    out = []
    for name in ("grace_hopper.jpg", "astronaut.jpg"):
        data = resource_path("sample", name).read_bytes()
        out.append(data)
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        assert image is not None
        ok, png = cv2.imencode(".png", image)
        assert ok
        out.append(png.tobytes())
    return out


def _mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    kind = rng.choice(("flip", "zero", "cut", "size"))
    if kind == "flip":
        for _ in range(rng.randint(1, 40)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif kind == "zero":
        start = rng.randrange(len(out))
        out[start : start + rng.randint(1, 4096)] = bytes(min(4096, len(out) - start))
    elif kind == "cut":
        out = out[: rng.randint(8, max(9, len(out) - 1))]
    elif out[:8] == b"\x89PNG\r\n\x1a\n":  # IHDR's width and height
        width, height = rng.choice((0, 1, 65535, 2**31 - 1, 2**32 - 1)), rng.choice((0, 3, 2**20))
        out[16:24] = struct.pack(">II", width, height)
    else:  # a JPEG frame header's height and width (SOF0/SOF2)
        at = max(bytes(out).find(b"\xff\xc0"), bytes(out).find(b"\xff\xc2"))
        if at > 0:
            out[at + 5 : at + 9] = struct.pack(">HH", rng.choice((0, 1, 65535)), rng.choice((0, 65535)))
    return bytes(out)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "c.mp4"
    synth_clip(path, width=64, height=48, fps=25, frames=3)
    return path


def _ended_well(code: int, err: str) -> None:
    assert code in (0, 2), (code, err[-600:])
    assert "Traceback" not in err and "internal error" not in err.lower(), err[-600:]
    if code == 2:
        lines = [line for line in err.strip().splitlines() if not line.startswith("ffdesk: warning")]
        assert len(lines) == 1, lines


@pytest.mark.parametrize("seed", range(CASES))
def test_a_damaged_photo_is_rendered_or_refused_in_one_line(
    seed: int, clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(seed)
    photos = _photos()
    data = _mutate(rng.choice(photos), rng)
    photo = tmp_path / ("photo.png" if data[:4] == b"\x89PNG" else "photo.jpg")
    photo.write_bytes(data)
    before = photo.read_bytes()
    code = main(["render", "--target", str(clip), "--output", str(tmp_path / "o.mp4"), "-q",
                 "--source", str(photo), "--no-resume"])  # fmt: skip
    _ended_well(code, capsys.readouterr().err)
    code = main(["render", "--target", str(photo), "--output", str(tmp_path / "o.png"), "-q", "--no-resume"])
    _ended_well(code, capsys.readouterr().err)
    assert photo.read_bytes() == before  # the source is never changed
