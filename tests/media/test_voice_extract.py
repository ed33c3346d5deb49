"""FaceFusion's voice extractor around its model: the chunks, windows and transforms as FaceFusion
makes them, a model that changes nothing giving the track back, and the MDX-Net stand-in taking a
voice out from under a hum and a whine."""

from __future__ import annotations

import numpy as np

from ffdesk.media import voice_extract as vx
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.standins import build_standin

SECONDS = 7.0  # longer than one 240 x 1024-sample chunk: two chunks overlap


def tones(seconds: float = SECONDS) -> np.ndarray:
    t = np.arange(int(vx.RATE * seconds)) / vx.RATE
    left = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t)
    return np.stack((left, 0.3 * np.sin(2 * np.pi * 330 * t)), axis=1)


def test_the_model_is_fed_facefusions_layout_and_a_model_that_changes_nothing_gives_the_track_back() -> None:
    audio = tones()
    shapes: list[tuple[int, ...]] = []

    def same(x: np.ndarray) -> np.ndarray:
        shapes.append(x.shape)
        return x

    out = vx.extract_voice(audio, same, 256)
    # two chunks (at 0 and 180 x 1024), each one window of 255 x 1024 samples: both channels in one item
    assert shapes == [(1, 4, 3072, 256), (1, 4, 3072, 256)]
    assert vx.model_samples(256) == 255 * 1024
    assert out.shape == audio.shape
    # the transform and its inverse give the samples back but at a chunk's first and last samples
    err = np.abs(out - audio).max(axis=1)
    assert err[2000:-2000][np.r_[0:175000, 190000:240000, 250000:330000]].max() < 1e-3
    assert (err > 1e-3).sum() < 100


def test_the_standin_takes_the_voice_out_from_under_a_hum_and_a_whine() -> None:
    import onnxruntime as ort

    spec = load_catalog().get("kim_vocal_2")
    session = ort.InferenceSession(
        build_standin(spec, dynamic_batch=True).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    t = np.arange(int(vx.RATE * 4.0)) / vx.RATE
    voice = 0.3 * np.sin(2 * np.pi * 500 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    noise = 0.3 * np.sin(2 * np.pi * 40 * t) + 0.2 * np.sin(2 * np.pi * 9000 * t)
    out = vx.extract_voice(
        np.stack([voice + noise] * 2, axis=1), lambda x: session.run(None, {"input": x})[0], 256
    )
    inner = slice(4000, -4000)
    assert np.abs(out[inner, 0] - voice[inner]).max() < 0.06  # the hum and the whine are gone
    assert np.abs(out[inner, 0] - voice[inner]).mean() < 0.01
    mono = vx.voice_for_lip_sync(out)
    assert mono.ndim == 1 and abs(mono.size - round(out.shape[0] / 3)) <= 1  # 48 kHz -> 16 kHz


def test_a_mono_track_and_an_empty_one() -> None:
    audio = tones(1.0)[:, 0]
    out = vx.extract_voice(audio, lambda x: x, 256)
    assert out.shape == (audio.size, 2)
    assert vx.voice_for_lip_sync(np.zeros((0, 2))).size == 0
