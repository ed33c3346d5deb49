"""FaceFusion's voice extractor: the voice taken out of a track before the lip syncer hears it.

FaceFusion's lip syncer reads its voice through `audio.read_voice`: the track at 48 kHz stereo,
the voice extracted by an MDX-Net model (`voice_extractor.py`: kim_vocal_2 by default,
kim_vocal_1, uvr_mdxnet), then resampled to 16 kHz (FFT resampling), made mono and prepared for
the mel spectrogram. The extraction, as FaceFusion does it:

- the track is cut into chunks of 240 x 1024 samples every 180 x 1024 (`CHUNK`, `STEP`); each
  chunk's voice is added where it falls and the sum divided by how many chunks covered a sample;
- a chunk is padded by `TRIM` samples on both sides and cut into windows of the model's length,
  (its input's last axis - 1) x 1024 samples, overlapping by 2 x `TRIM`; each window of each
  channel goes through a short-time Fourier transform (a Hann window of `FFT` samples, a hop of
  1024, scipy's scaling undone), whose real and imaginary parts of both channels are the model's
  four input channels, cut to its first `BINS` frequency bins;
- the model's output, the voice's spectrum in the same layout, is padded back to all the bins,
  turned back into samples (the inverse transform), trimmed and put together in order.

The samples are floats in -1..1 (FaceFusion's are int16 divided by 32767: the same but for a
factor of 32768 / 32767, which the peak normalisation that follows takes out).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

RATE = 48000
"""The rate the track is read at for the extractor (FaceFusion's voice_sample_rate)."""
CHUNK = 240 * 1024
STEP = 180 * 1024
"""FaceFusion's voice_chunk_size and voice_step_size (samples)."""
TRIM = 3840
"""Samples of padding on each side of a model window (FaceFusion's voice_trim_size)."""
FFT = 7680
OVERLAP = 6656
"""The transform's window and overlap (a hop of 1024 samples)."""
BINS = 3072
"""The frequency bins the model takes (of FFT / 2 + 1 = 3841)."""
HOP = FFT - OVERLAP

Model = Callable[[F32], F32]
"""The extractor model: [N, 4, BINS, frames] spectra in, the voice's in the same shape out."""


def _window() -> F64:
    from scipy.signal import windows

    return np.asarray(windows.hann(FFT), np.float64)


def model_samples(frames: int) -> int:
    """The samples of one model window for a model that takes `frames` transform frames."""
    return (frames - 1) * HOP


def _windows(chunk: F64, size: int) -> tuple[F64, int]:
    """A chunk (2 x n) as rows of `size` samples overlapping by 2 x TRIM (the left channel's and
    the right channel's row of each window in turn), and the padding added at its end."""
    step = size - 2 * TRIM
    pad = step - chunk.shape[1] % step
    padded = np.pad(chunk, ((0, 0), (TRIM, TRIM + pad)))
    rows = [padded[:, start : start + size] for start in range(0, chunk.shape[1] + pad, step)]
    return np.concatenate(rows, axis=0).reshape(-1, size), pad


def to_spectra(rows: F64) -> F32:
    """Rows of samples (L, R, L, R, ...) as the model's input [N, 4, BINS, frames]."""
    from scipy.signal import stft

    window = _window()
    spec = stft(rows, nperseg=FFT, noverlap=OVERLAP, window=window)[2]  # rows x 3841 x frames
    parts = np.stack((spec.real, spec.imag), axis=-1).transpose(0, 3, 1, 2)  # rows x 2 x 3841 x frames
    frames = parts.shape[-1]
    four = parts.reshape(-1, 2, 2, FFT // 2 + 1, frames).reshape(-1, 4, FFT // 2 + 1, frames)
    four = four[:, :, :BINS] * window.sum()  # scipy's spectrum scaling undone
    return np.ascontiguousarray(four, np.float32)


def from_spectra(spectra: npt.ArrayLike) -> F64:
    """The model's output [N, 4, BINS, frames] back to rows of samples (L, R, L, R, ...)."""
    from scipy.signal import istft

    window = _window()
    x = np.asarray(spectra, np.float64)
    full = np.pad(x, ((0, 0), (0, 0), (0, FFT // 2 + 1 - x.shape[2]), (0, 0)))
    pairs = full.reshape(-1, 2, FFT // 2 + 1, x.shape[3]).transpose(0, 2, 3, 1)
    complex_spec = pairs[..., 0] + 1j * pairs[..., 1]
    rows = np.asarray(istft(complex_spec, nperseg=FFT, noverlap=OVERLAP, window=window)[1], np.float64)
    return rows / window.sum()


def extract_chunk(chunk: F64, model: Model, frames: int) -> F64:
    """The voice of a chunk (n x 2 samples) by `model` (whose windows take `frames` frames)."""
    size = model_samples(frames)
    rows, pad = _windows(chunk.T, size)
    voice_rows = from_spectra(model(to_spectra(rows)))
    parts = voice_rows.reshape(-1, 2, size)[:, :, TRIM:-TRIM].transpose(1, 0, 2)
    joined = parts.reshape(2, -1)[:, :-pad] if pad else parts.reshape(2, -1)
    return np.ascontiguousarray(joined.T)


def chunk_count(samples: int) -> int:
    """How many chunks `extract_voice` cuts a track of `samples` samples into."""
    return len(range(0, samples, STEP))


def extract_voice(
    samples: npt.ArrayLike,
    model: Model,
    frames: int,
    on_chunk: Callable[[int, int], None] | None = None,
) -> F64:
    """The voice of a stereo track (n x 2 samples at `RATE`) by `model`: chunk by chunk, averaged
    where the chunks overlap. A mono track (n,) is taken as both channels. `on_chunk(done,
    total)` is called after each chunk."""
    audio = np.asarray(samples, np.float64)
    if audio.ndim == 1:
        audio = np.stack((audio, audio), axis=1)
    total = np.zeros((audio.shape[0], 2), np.float64)
    count = np.zeros((audio.shape[0], 2), np.float64)
    starts = range(0, audio.shape[0], STEP)
    for done, start in enumerate(starts, 1):
        end = min(start + CHUNK, audio.shape[0])
        total[start:end] += extract_chunk(audio[start:end], model, frames)
        count[start:end] += 1
        if on_chunk is not None:
            on_chunk(done, len(starts))
    return total / np.maximum(count, 1)


def voice_for_lip_sync(voice: npt.ArrayLike, rate: int = 16000) -> F64:
    """The extracted stereo voice (at `RATE`) as the lip syncer hears it: resampled to `rate` by
    FFT resampling and made mono (the mean of the channels), as FaceFusion's prepare_voice."""
    from scipy.signal import resample

    x = np.asarray(voice, np.float64)
    if x.shape[0] == 0:
        return np.zeros(0, np.float64)
    length = round(x.shape[0] * rate / RATE)
    resampled = np.asarray(resample(x, length), np.float64)
    return resampled.mean(axis=1) if resampled.ndim > 1 else resampled
