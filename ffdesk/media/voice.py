"""A voice track as a lip syncer hears it: 16 kHz mono samples, mel frames, one window a frame.

FaceFusion's lip syncer (wav2lip) takes, for each video frame, a window of 16 mel frames x 80
bands. How the window is made (its audio.py) is `MelSettings`' defaults: the track at 16 kHz
mono, divided by its peak, pre-emphasised; a centred short-time Fourier transform of 800
samples (Hann window) every 200 samples (80 mel frames a second), scaled by the window's sum;
the magnitudes through 80 triangular mel filters from 55 to 7600 Hz. The log scaling and the
weight are the model's own preparation (`ffdesk.swap.lipsync`). Video frame k takes the k-th of
the windows FaceFusion cuts at the clip's frame rate (`window_ends`); frames past the last window
have none.

FaceFusion first separates the vocals with a voice extractor model (kim_vocal_2 by default); no
such model ships here, so the whole track is heard: speech over music or noise syncs less well.
It reads 48 kHz stereo through ffmpeg and resamples by FFT; here FFmpeg's resampler (PyAV) gives
16 kHz mono directly, which changes the mel frames by the resamplers' rounding only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt

from ffdesk.errors import MediaError
from ffdesk.media._errors import check_readable_file, describe
from ffdesk.media.channel_layouts import settle

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

MAX_SECONDS = 4 * 3600
"""The longest track read (a 4-hour track is 230 million samples, 0.9 GiB as float32)."""


@dataclass(frozen=True)
class MelSettings:
    """How the voice becomes mel frames (FaceFusion's audio.py; the catalog's `options.audio`)."""

    sample_rate: int = 16000
    pre_emphasis: float = 0.97
    n_fft: int = 800
    hop: int = 200
    mel_bands: int = 80
    fmin: float = 55.0
    fmax: float = 7600.0
    window_frames: int = 16
    """Mel frames in one video frame's window."""

    @property
    def mel_per_second(self) -> float:
        return self.sample_rate / self.hop


def read_voice(path: Path, *, sample_rate: int = 16000, start_s: float = 0.0, channels: int = 1) -> F32:
    """The first audio stream of `path` (an audio file or a clip) as float samples at
    `sample_rate` (mono: n; `channels` 2: n x 2, a mono stream on both), from `start_s` seconds
    into the stream. `MediaError` (one line) for a file that is missing, not media, has no audio
    stream or cannot be decoded."""
    check_readable_file(path)
    try:
        container = av.open(str(path), "r", metadata_errors="ignore")
    except av.error.InvalidDataError as exc:
        raise MediaError(f"{path}: not an audio file (damaged, truncated or not a media file)") from exc
    except (av.error.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({describe(exc)})") from exc
    with container:
        if not container.streams.audio:
            kinds = sorted({s.type for s in container.streams})
            what = f"only {', '.join(kinds)} streams" if kinds else "no streams"
            raise MediaError(f"{path}: no audio stream ({what})")
        stream = container.streams.audio[0]
        if stream.codec_context is None:
            raise MediaError(f"{path}: unsupported audio codec (no decoder available)")
        settle(stream)  # before decoding: a MOV's 7.1 in custom order crashes PyAV's frames
        layout = "stereo" if channels == 2 else "mono"
        resampler = av.AudioResampler(format="flt", layout=layout, rate=sample_rate)
        parts: list[F32] = []
        total, limit = 0, MAX_SECONDS * sample_rate
        try:
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    parts.append(np.asarray(out.to_ndarray(), np.float32).reshape(-1))
                    total += parts[-1].size
                if total > limit:
                    raise MediaError(f"{path}: audio longer than {MAX_SECONDS // 3600} hours")
            for out in resampler.resample(None):
                parts.append(np.asarray(out.to_ndarray(), np.float32).reshape(-1))
        except (av.error.FFmpegError, ValueError) as exc:
            raise MediaError(f"{path}: cannot decode audio ({describe(exc)})") from exc
    samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    if channels == 2:  # packed: left, right, left, ...
        samples = samples.reshape(-1, 2)
    skip = max(0, int(round(start_s * sample_rate)))
    return samples[skip:]


def prepare_samples(samples: npt.ArrayLike, pre_emphasis: float = 0.97) -> F64:
    """Divided by the peak (a silent track stays zeros) and pre-emphasised:
    y[n] = x[n] - pre_emphasis * x[n - 1]."""
    x = np.asarray(samples, np.float64).reshape(-1)
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak > 0.0:
        x = x / peak
    out = x.copy()
    out[1:] -= pre_emphasis * x[:-1]
    return out


def _hertz_to_mel(hertz: npt.ArrayLike) -> F64:
    return np.asarray(2595.0 * np.log10(1.0 + np.asarray(hertz, np.float64) / 700.0), np.float64)


def _mel_to_hertz(mel: npt.ArrayLike) -> F64:
    return np.asarray(700.0 * (10.0 ** (np.asarray(mel, np.float64) / 2595.0) - 1.0), np.float64)


def mel_filter_bank(settings: MelSettings = MelSettings()) -> F64:
    """`mel_bands` x (n_fft / 2 + 1) triangular filters, evenly spaced in mel between fmin and
    fmax. As FaceFusion builds them, filter k spans only the FFT bins from its own edge to the
    next one (not to the one after), with a triangle of that many points."""
    from scipy.signal.windows import triang

    bins = settings.n_fft // 2 + 1
    edges_mel = np.linspace(
        _hertz_to_mel(settings.fmin), _hertz_to_mel(settings.fmax), settings.mel_bands + 2
    )
    edges = np.floor((settings.n_fft + 1) * _mel_to_hertz(edges_mel) / settings.sample_rate).astype(np.int64)
    bank = np.zeros((settings.mel_bands, bins), np.float64)
    for k in range(settings.mel_bands):
        start, end = int(edges[k]), int(edges[k + 1])
        if end > start:
            bank[k, start:end] = triang(end - start)
    return bank


def mel_frames(samples: npt.ArrayLike, settings: MelSettings = MelSettings()) -> F64:
    """`mel_bands` x T mel magnitudes of already prepared samples (`prepare_samples`): a centred
    STFT (Hann, `n_fft` samples, hop `hop`, zero-padded at both ends, spectrum scaling), then
    the filter bank. Column t is centred on sample t x hop."""
    from scipy.signal import stft

    x = np.asarray(samples, np.float64).reshape(-1)
    if x.size == 0:
        return np.zeros((settings.mel_bands, 0), np.float64)
    overlap = settings.n_fft - settings.hop
    spectrum = stft(x, nperseg=settings.n_fft, nfft=settings.n_fft, noverlap=overlap)[2]
    return np.asarray(mel_filter_bank(settings) @ np.abs(spectrum), np.float64)


def window_ends(mel_count: int, fps: float, settings: MelSettings = MelSettings()) -> npt.NDArray[np.int64]:
    """The end (exclusive) of each video frame's mel window, frame 0 first: of the points
    floor(j x mel_per_second / fps), j = 0, 1, ... below `mel_count`, those at least
    `window_frames` (FaceFusion's extract_audio_frames)."""
    if fps <= 0 or mel_count <= 0:
        return np.zeros(0, np.int64)
    step = settings.mel_per_second / fps
    points = np.arange(0, mel_count, step).astype(np.int64)
    return points[points >= settings.window_frames]


@dataclass(frozen=True)
class VoiceWindows:
    """A voice track's mel frames cut into one window per video frame."""

    mel: F32
    """mel_bands x T mel magnitudes (`mel_frames`)."""
    ends: npt.NDArray[np.int64]
    """Each video frame's window end (`window_ends`)."""
    window_frames: int = 16

    def __len__(self) -> int:
        """The video frames that have a window (the later ones have none)."""
        return int(self.ends.size)

    def window(self, frame: int) -> F32 | None:
        """`mel_bands` x `window_frames` mel magnitudes for video frame `frame` (0: the first
        rendered frame), or None when the voice has ended (or `frame` is negative)."""
        if not 0 <= frame < self.ends.size:
            return None
        end = int(self.ends[frame])
        return self.mel[:, end - self.window_frames : end]


def voice_windows(samples: npt.ArrayLike, fps: float, settings: MelSettings = MelSettings()) -> VoiceWindows:
    """The windows of raw samples (at `settings.sample_rate`) for a clip at `fps` frames/s."""
    mel = mel_frames(prepare_samples(samples, settings.pre_emphasis), settings)
    return VoiceWindows(
        mel.astype(np.float32), window_ends(mel.shape[1], fps, settings), settings.window_frames
    )


def read_voice_windows(
    path: Path, fps: float, settings: MelSettings = MelSettings(), *, start_s: float = 0.0
) -> VoiceWindows:
    """`voice_windows` of the audio of `path` from `start_s` seconds (`read_voice`)."""
    return voice_windows(read_voice(path, sample_rate=settings.sample_rate, start_s=start_s), fps, settings)
