"""An image target with an alpha channel (a graphic on a transparent background) keeps it in an
output that can hold one, says in one warning line where the output cannot, and with `--matte
alpha` has the product of its alpha and the swap's matte; a target without one is rendered as
it always was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from ffdesk.media.images import read_image
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import MatteKind, RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

PHOTO = Path(resource_path("sample", "astronaut.jpg"))
SOURCE = Path(resource_path("sample", "grace_hopper.jpg"))
BORDER = 64
"""The transparent border's width; the face lies inside it."""


def _border_alpha(height: int, width: int) -> npt.NDArray[np.uint8]:
    alpha = np.zeros((height, width), np.uint8)
    alpha[BORDER:-BORDER, BORDER:-BORDER] = 255
    alpha[BORDER // 2 : BORDER, BORDER:-BORDER] = 128  # a half-transparent band
    alpha[BORDER:-BORDER, 240:256] = 64  # a mostly transparent stripe across the face
    return alpha


def _targets(folder: Path) -> tuple[Path, Path, npt.NDArray[np.uint8]]:
    """The astronaut as an RGBA PNG with a transparent border, the same pixels as an opaque PNG,
    and the alpha."""
    rgb = read_image(PHOTO)
    alpha = _border_alpha(*rgb.shape[:2])
    transparent, opaque = folder / "graphic.png", folder / "opaque.png"
    Image.fromarray(np.dstack((rgb, alpha)), "RGBA").save(transparent)
    Image.fromarray(rgb, "RGB").save(opaque)
    return transparent, opaque, alpha


def _render(target: Path, output: Path, env: RuntimeEnv, matte: MatteKind = "none") -> list[str]:
    warnings: list[str] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Warning):
            warnings.append(event.message)

    job = RenderJob(sources=(SOURCE,), target=target, output=output, matte=matte)
    run_render(job, on_event, env=env)
    return warnings


def _channels(path: Path) -> tuple[str, npt.NDArray[np.uint8]]:
    with Image.open(path) as picture:
        return picture.mode, np.asarray(picture)


@pytest.mark.parametrize("suffix", [".png", ".webp"])
def test_the_output_keeps_the_targets_alpha(tmp_path: Path, run_env: RuntimeEnv, suffix: str) -> None:
    target, _, alpha = _targets(tmp_path)
    out = tmp_path / f"out{suffix}"
    warnings = _render(target, out, run_env)
    mode, pixels = _channels(out)
    assert mode == "RGBA"
    np.testing.assert_array_equal(pixels[..., 3], alpha)
    assert not [w for w in warnings if "transparency" in w]


def test_a_jpeg_output_says_the_transparency_is_lost(tmp_path: Path, run_env: RuntimeEnv) -> None:
    target, _, _ = _targets(tmp_path)
    out = tmp_path / "out.jpg"
    warnings = _render(target, out, run_env)
    lost = [w for w in warnings if "transparency" in w]
    assert lost == ["graphic.png's transparency is not kept in a JPEG; write .png, .webp or .tif to keep it"]
    assert _channels(out)[0] == "RGB"


def test_matte_alpha_multiplies_the_matte_by_the_targets_alpha(tmp_path: Path, run_env: RuntimeEnv) -> None:
    target, opaque, alpha = _targets(tmp_path)
    _render(opaque, tmp_path / "matte.png", run_env, matte="alpha")
    matte = _channels(tmp_path / "matte.png")[1][..., 3].astype(np.uint32)
    assert matte.max() == 255  # a face was swapped: the product is not the target's alpha alone
    _render(target, tmp_path / "both.png", run_env, matte="alpha")
    mode, pixels = _channels(tmp_path / "both.png")
    assert mode == "RGBA"
    expected = (matte * alpha + 127) // 255
    assert not np.array_equal(expected, matte)  # the stripe crosses the pasted face
    np.testing.assert_array_equal(pixels[..., 3], expected.astype(np.uint8))


def test_matte_clip_keeps_the_targets_alpha_and_writes_the_matte_beside(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    target, _, alpha = _targets(tmp_path)
    _render(target, tmp_path / "out.png", run_env, matte="clip")
    mode, pixels = _channels(tmp_path / "out.png")
    assert mode == "RGBA"
    np.testing.assert_array_equal(pixels[..., 3], alpha)
    assert _channels(tmp_path / "out-matte.png")[0] == "L"


def test_a_target_without_alpha_is_rendered_as_before(tmp_path: Path, run_env: RuntimeEnv) -> None:
    _, opaque, _ = _targets(tmp_path)
    warnings = _render(opaque, tmp_path / "from_png.png", run_env)
    _render(PHOTO, tmp_path / "from_jpg.png", run_env)
    mode, pixels = _channels(tmp_path / "from_png.png")
    assert mode == "RGB"
    assert not [w for w in warnings if "transparency" in w]
    np.testing.assert_array_equal(pixels, _channels(tmp_path / "from_jpg.png")[1])
