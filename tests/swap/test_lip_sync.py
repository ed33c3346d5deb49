"""The lip syncer's pieces: the voice as mel windows (FaceFusion's audio preparation), the model
inputs and outputs, and the stand-in's contract."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.media.voice import (
    MelSettings,
    mel_filter_bank,
    mel_frames,
    prepare_samples,
    read_voice,
    voice_windows,
    window_ends,
)
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.standins import build_standin
from ffdesk.swap import lipsync as ls

RATE = 16000


def reference_mel(samples: np.ndarray) -> np.ndarray:
    """The mel frames computed by hand: zero-pad half a window each side, Hann frames of 800
    every 200 samples, one-sided FFT magnitudes over the window's sum, through the filter bank."""
    n_fft, hop = 800, 200
    x = np.concatenate([np.zeros(n_fft // 2), samples, np.zeros(n_fft // 2)])
    frames = 1 + int(np.ceil((x.size - n_fft) / hop))
    x = np.concatenate([x, np.zeros(max(0, (frames - 1) * hop + n_fft - x.size))])
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
    spectra = np.stack(
        [np.abs(np.fft.rfft(x[t * hop : t * hop + n_fft] * window)) / window.sum() for t in range(frames)], 1
    )
    return mel_filter_bank() @ spectra


def tone(hertz: float, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return 0.5 * np.sin(2 * np.pi * hertz * t)


def test_mel_frames_match_a_reference_computation() -> None:
    rng = np.random.default_rng(0)
    samples = prepare_samples(rng.standard_normal(RATE // 2) * 0.1 + tone(440, 0.5))
    ours, ref = mel_frames(samples), reference_mel(samples)
    assert ours.shape == ref.shape == (80, RATE // 2 // 200 + 1)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("hertz", [300.0, 1000.0, 3000.0])
def test_a_tones_energy_lands_in_its_mel_band(hertz: float) -> None:
    settings = MelSettings()
    mel = mel_frames(prepare_samples(tone(hertz)), settings)
    band = int(np.argmax(mel[:, 10:-10].mean(axis=1)))
    # the band whose filter spans the tone's FFT bin (FaceFusion: floor(801 f / 16000))
    edges_hz = 700 * (
        10 ** (np.linspace(2595 * np.log10(1 + 55 / 700), 2595 * np.log10(1 + 7600 / 700), 82) / 2595) - 1
    )
    edges = np.floor(801 * edges_hz / RATE).astype(int)
    bin_ = hertz * 800 / RATE
    expected = [k for k in range(80) if edges[k] <= round(bin_) < edges[k + 1]]
    assert expected and abs(band - expected[0]) <= 1
    higher = int(np.argmax(mel_frames(prepare_samples(tone(hertz * 2)))[:, 10:-10].mean(axis=1)))
    assert higher > band


def test_prepare_samples_normalises_the_peak_and_pre_emphasises() -> None:
    out = prepare_samples([0.0, 2.0, 2.0, -4.0])
    np.testing.assert_allclose(out, [0.0, 0.5, 0.5 - 0.97 * 0.5, -1.0 - 0.97 * 0.5])
    assert not prepare_samples(np.zeros(10)).any()  # silence stays zeros (no division by zero)


def test_each_frame_gets_a_window_of_16_mel_frames_cut_as_facefusion_cuts_them() -> None:
    ends = window_ends(200, 25.0)
    assert ends[0] == 16 and list(ends[:4]) == [16, 19, 22, 25]  # floor(j x 3.2) from j = 5
    assert ends[-1] < 200
    voice = voice_windows(tone(500, 2.0), 25.0)
    assert len(voice) == len(window_ends(voice.mel.shape[1], 25.0))
    windows = [voice.window(i) for i in range(len(voice))]
    assert all(w is not None and w.shape == (80, 16) and w.dtype == np.float32 for w in windows)
    assert voice.window(len(voice)) is None and voice.window(-1) is None
    # about 2 s of voice at 25 frames/s: 50 frames less the first window's 0.2 s
    assert 44 <= len(voice) <= 46


def write_wav(path: Path, samples: np.ndarray, rate: int = 22050) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        stereo = np.repeat((samples * 32000).astype(np.int16)[:, None], 2, axis=1)
        w.writeframes(stereo.tobytes())
    return path


def test_read_voice_gives_16_khz_mono_from_any_rate(tmp_path: Path) -> None:
    t = np.arange(22050) / 22050
    path = write_wav(tmp_path / "tone.wav", 0.5 * np.sin(2 * np.pi * 700 * t))
    samples = read_voice(path)
    assert samples.dtype == np.float32 and abs(samples.size - RATE) < 200
    spectrum = np.abs(np.fft.rfft(samples[1000:9000]))
    assert abs(np.argmax(spectrum) * RATE / 8000 - 700) < 5
    assert abs(read_voice(path, start_s=0.5).size - RATE // 2) < 200


def test_bad_audio_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="file not found"):
        read_voice(tmp_path / "missing.wav")
    junk = tmp_path / "junk.wav"
    junk.write_bytes(np.random.default_rng(1).integers(0, 255, 4000, np.uint8).tobytes())
    with pytest.raises(UserError, match="not an audio file") as exc:
        read_voice(junk)
    assert "\n" not in str(exc.value)


def test_source_input_is_facefusions_log_scale_times_the_weight() -> None:
    window = np.full((80, 16), 1e-9)
    window[0, 0] = 1.0
    x = ls.source_input(window)
    assert x.shape == (1, 1, 80, 16) and x.dtype == np.float32
    assert x[0, 0, 0, 0] == pytest.approx(3.2) and x[0, 0, 1, 1] == pytest.approx(-4.0)
    assert ls.source_input(window, 1.0)[0, 0, 0, 0] == pytest.approx(6.4)
    assert not ls.source_input(window, 0.0).any()


def test_target_input_is_the_crop_half_blacked_then_whole_in_bgr() -> None:
    crop = np.zeros((96, 96, 3), np.uint8)
    crop[..., 0] = 255  # red
    x = ls.target_input(crop)
    assert x.shape == (1, 6, 96, 96) and x.dtype == np.float32
    assert x[0, 2, :48].min() == 1.0 and not x[0, 2, 48:].any()  # the masked copy's red (BGR: 2)
    assert x[0, 5].min() == 1.0 and not x[0, 3:5].any()
    rgb = ls.output_pixels(x[:, 3:])
    assert (rgb == crop).all()


def test_mouth_box_maps_the_points_box_onto_the_model_square() -> None:
    points = np.array([[100.0, 200.0], [300.0, 260.0], [150.0, 392.0]])
    matrix, interpolation = ls.mouth_box(points, 96)
    corners = np.array([[100, 200, 1], [300, 392, 1]], np.float64) @ matrix.T
    np.testing.assert_allclose(corners, [[0, 0], [96, 96]], atol=1e-4)
    assert interpolation == 3  # cv2.INTER_AREA: the box is larger than 96


def test_catalog_entries_and_standins_honour_the_wav2lip_contract() -> None:
    import onnxruntime as ort

    for name in ("wav2lip_96", "wav2lip_gan_96"):
        spec = load_catalog().get(name)
        settings = ls.lip_sync_spec(spec)
        assert (settings.size, settings.crop_size, settings.template) == (96, 512, "ffhq_512")
        assert settings.source_shape == (80, 16) and settings.area == "lower-face"
        assert dict(settings.audio)["n_fft"] == 800
        model = build_standin(spec)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        assert [(i.name, i.shape) for i in session.get_inputs()] == [
            ("source", [1, 1, 80, 16]),
            ("target", [1, 6, 96, 96]),
        ]
        target = np.random.default_rng(2).random((1, 6, 96, 96), np.float32)
        quiet = session.run(None, {"source": np.full((1, 1, 80, 16), -4, np.float32), "target": target})[0]
        loud = session.run(None, {"source": np.full((1, 1, 80, 16), 1, np.float32), "target": target})[0]
        assert quiet.shape == (1, 3, 96, 96) and quiet.min() >= 0 and quiet.max() <= 1
        assert np.abs(quiet - loud).max() > 0.3  # the stand-in hears its source


def test_the_edtalk_entry_and_standin_take_the_whole_face_and_a_weight() -> None:
    import onnxruntime as ort

    spec = load_catalog().get("edtalk_256")
    settings = ls.lip_sync_spec(spec)
    assert (settings.type, settings.size, settings.crop_size, settings.weight_input) == (
        "edtalk",
        256,
        512,
        "weight",
    )
    assert not settings.needs_mesh
    session = ort.InferenceSession(
        build_standin(spec).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    assert [(i.name, i.shape) for i in session.get_inputs()] == [
        ("source", [1, 1, 80, 16]),
        ("target", [1, 3, 256, 256]),
        ("weight", [1]),
    ]
    crop = np.random.default_rng(4).integers(0, 255, (512, 512, 3), np.uint8)
    target = ls.edtalk_target(crop, 256)
    assert target.shape == (1, 3, 256, 256) and target.max() <= 1.0
    # RGB in, RGB out: no channel swap (FaceFusion flips its BGR frames, ffdesk's are RGB)
    np.testing.assert_allclose(target[0, 0, 0, 0] * 255, crop[:2, :2, 0].mean(), atol=0.6)
    loud = np.full((80, 16), 10.0, np.float32)
    # the voice is not weighted for EDTalk: the weight is its own input
    np.testing.assert_array_equal(ls.source_input(loud, None), ls.source_input(loud, 0.5))

    class Named:
        def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            names = [o.name for o in session.get_outputs()]
            return dict(zip(names, session.run(None, inputs), strict=True))

    drawn = ls.LipSyncer(Named(), settings, weight=0.5).mouth(crop, None, loud)
    assert drawn.shape == (512, 512, 3) and drawn.dtype == np.uint8
    light = ls.LipSyncer(Named(), settings, weight=0.05).mouth(crop, None, loud)
    assert int(light.astype(int).sum()) > int(drawn.astype(int).sum())  # a lighter touch


def test_a_lip_syncer_of_an_unknown_type_is_refused() -> None:
    from dataclasses import replace

    spec = load_catalog().get("edtalk_256")
    options = tuple((k, "sadtalker" if k == "type" else v) for k, v in spec.options)
    with pytest.raises(ValueError, match="options.type 'sadtalker'"):
        ls.lip_sync_spec(replace(spec, options=options))


def test_a_model_of_another_kind_is_not_a_lip_syncer() -> None:
    with pytest.raises(ValueError, match="not a lip syncer"):
        ls.lip_sync_spec(load_catalog().get("xseg_1"))
