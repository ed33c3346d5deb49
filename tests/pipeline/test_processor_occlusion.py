"""Face processors without a swapper model honour `--mask occlusion` with occlusion models of their
own, as FaceFusion's processors do when its mask types hold 'occlusion': on carphone with a blue
bar in front of the mouth (an XSeg stand-in whose mask follows the picture: skin kept, blue left
out) the bar stays as it was, where under the box mask alone the processor redraws it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.standins import write_standins
from tests.modelpacks.helpers import content_masks
from tests.pipeline.barred_clip import bar_moved, barred_clip

PROCESSORS = {
    "age modifier": ("--age-modifier", "fran", "--age-modifier-direction", "100"),
    "expression restorer": ("--expression-restorer",),
}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("occlusion_pack")
    write_standins(
        folder,
        ["fran", *(f"live_portrait_{p}" for p in ("feature_extractor", "motion_extractor", "generator"))],
    )
    content_masks(folder)
    return folder


@pytest.fixture(scope="module")
def barred(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return barred_clip(tmp_path_factory.mktemp("barred"))


def render(out: Path, target: Path, *extra: str) -> list[np.ndarray]:
    args = ["render", "--target", str(target), "--output", str(out), "--encoder", "png", "--no-resume", "-q"]
    assert main([*args, *extra]) == 0
    return [read_image(p) for p in sorted(out.glob("*.png"))]


# the age modifier's run is left to `-m slow` (47 s of the suite): the same occlusion path as the
# expression restorer's, through the shared face-processor paste
@pytest.mark.parametrize(
    "processor", [pytest.param(p, marks=pytest.mark.slow) if p == "age modifier" else p for p in PROCESSORS]
)
def test_alone_a_face_processor_keeps_what_is_in_front_of_the_face(
    tmp_path: Path, pack: Path, barred: Path, capsys: pytest.CaptureFixture[str], processor: str
) -> None:
    flags = ("--models-dir", str(pack), *PROCESSORS[processor])
    plain = render(tmp_path / "plain", barred)
    box = render(tmp_path / "box", barred, *flags, "--mask", "box")
    capsys.readouterr()
    masked = render(tmp_path / "occlusion", barred, *flags, "--mask", "box,occlusion")
    assert "occlusion" not in capsys.readouterr().err
    assert len(masked) == len(box) == len(plain) == 30
    moved_box, moved_masked = bar_moved(box, plain), bar_moved(masked, plain)
    assert moved_box > 0.5 and moved_masked < 0.25 * moved_box, (moved_masked, moved_box)
    face = (slice(30, 84), slice(60, 110))  # above the bar: still redrawn under the mask

    def face_moved(frames: list[np.ndarray]) -> float:
        pairs = zip(frames, plain, strict=True)
        return float(np.mean([np.abs(f[face].astype(int) - p[face].astype(int)).mean() for f, p in pairs]))

    assert face_moved(masked) > 0.25 * face_moved(box) > 0.1, (face_moved(masked), face_moved(box))
