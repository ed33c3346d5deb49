"""Lip sync in a render: a real clip (carphone) whose mouth follows a spoken sentence (espeak-ng),
with the wav2lip and EDTalk stand-ins; every pixel outside the pasted mouths stays exactly as rendered without
lip sync (PNG output), and bad voices are one line."""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs far away from here."
FIRST_SECOND = ("--end", "1")
"""The clip's first 30 frames (of 120), spoken over from the first, for the renders that compare
voices and settings."""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lip_pack")
    write_standins(folder, ["wav2lip_96", "wav2lip_gan_96", "edtalk_256"])
    return folder


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng is not installed (scripts/setup.sh installs it)")
    path = tmp_path_factory.mktemp("voice") / "speech.wav"
    subprocess.run([espeak, "-w", str(path), SENTENCE], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def silence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("voice") / "silence.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(np.zeros(22050 * 5, np.int16).tobytes())
    return path


def render(out: Path, *extra: str) -> list[np.ndarray]:
    args = ["render", "--target", str(carphone()), "--output", str(out), "--encoder", "png"]
    assert main([*args, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted(out.glob("*.png"))]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("plain") / "frames")


def synced(
    tmp: Path, pack: Path, voice: Path, model: str = "wav2lip_gan_96", *extra: str
) -> list[np.ndarray]:
    tmp.mkdir(parents=True, exist_ok=True)
    args = ("--models-dir", str(pack), "--lip-syncer", model, "--lip-sync-audio", str(voice))
    return render(tmp / "frames", *args, *extra)


@pytest.fixture(scope="module")
def talking(tmp_path_factory: pytest.TempPathFactory, pack: Path, speech: Path) -> list[np.ndarray]:
    """The clip lip-synced (wav2lip_gan_96) to the sentence: rendered once for the tests that
    look at it (in user folders of its own, as each test's renders are)."""
    home = tmp_path_factory.mktemp("talk-home")
    with pytest.MonkeyPatch.context() as mp:
        for key in ("CACHE", "DATA", "CONFIG"):
            mp.setenv(f"XDG_{key}_HOME", str(home / key.lower()))
        return synced(tmp_path_factory.mktemp("talk"), pack, speech)


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def test_the_mouth_follows_the_voice_and_nothing_else_changes(
    talking: list[np.ndarray], plain: list[np.ndarray]
) -> None:
    frames = talking
    assert len(frames) == len(plain) == 120
    masks = [changed(a, b) for a, b in zip(frames, plain, strict=True)]
    counts = [int(m.sum()) for m in masks]
    assert sum(c > 0 for c in counts) >= 100  # the face is found on nearly every frame
    for m in masks:  # only the lower face: a small part of the 176 x 144 frame, below the eyes
        if m.any():
            ys, xs = np.nonzero(m)
            assert m.sum() < 0.08 * m.size and ys.min() > 40
    # the mouth changes with the voice: how dark it is drawn follows the window's loudness
    darkness = [
        float((p.astype(int) - f.astype(int))[m].sum()) / max(1, int(m.sum()))
        for f, p, m in zip(frames, plain, masks, strict=True)
    ]
    spoken = [d for d, c in zip(darkness, counts, strict=True) if c]
    assert np.std(spoken) > 2.0


def test_silence_and_speech_give_different_mouths(
    tmp_path: Path, pack: Path, talking: list[np.ndarray], silence: Path, plain: list[np.ndarray]
) -> None:
    quiet = synced(tmp_path / "quiet", pack, silence, "wav2lip_gan_96", *FIRST_SECOND)
    n = len(quiet)
    assert n == 30
    differ = [int(changed(a, b).sum()) for a, b in zip(talking[:n], quiet, strict=True)]
    assert sum(d > 20 for d in differ) >= 20
    # silence barely moves the mouth; speech moves it a lot
    move_quiet = np.mean(
        [np.abs(q.astype(int) - p.astype(int)).max() for q, p in zip(quiet, plain[:n], strict=True)]
    )
    move_talk = np.mean(
        [np.abs(t.astype(int) - p.astype(int)).max() for t, p in zip(talking[:n], plain[:n], strict=True)]
    )
    assert move_talk > 2 * move_quiet


def test_frames_past_the_voice_are_left_untouched(
    tmp_path: Path, pack: Path, plain: list[np.ndarray]
) -> None:
    short = tmp_path / "short.wav"
    t = np.arange(int(22050 * 1.5)) / 22050
    with wave.open(str(short), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes((np.sin(2 * np.pi * 220 * t) * 20000).astype(np.int16).tobytes())
    frames = synced(tmp_path, pack, short, "wav2lip_96", "--end", "2")  # 60 frames, 20 past the voice
    # 1.5 s at 29.97 frames/s less the first window's 0.2 s: about 39 frames have a window
    touched = [bool(changed(a, b).any()) for a, b in zip(frames, plain[:60], strict=True)]
    assert any(touched[:39])
    assert not any(touched[40:])


def test_bad_voices_are_one_line(tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = carphone()
    base = [
        "render",
        "--target",
        str(clip),
        "--encoder",
        "png",
        "--no-resume",
        "-q",
        "--models-dir",
        str(pack),
    ]
    junk = tmp_path / "junk.wav"
    junk.write_bytes(np.random.default_rng(3).integers(0, 255, 5000, np.uint8).tobytes())
    cases = [
        (["--lip-syncer", "wav2lip_96", "--lip-sync-audio", str(tmp_path / "missing.wav")], "file not found"),
        (["--lip-syncer", "wav2lip_96", "--lip-sync-audio", str(junk)], "not an audio file"),
        (["--lip-syncer", "wav2lip_96", "--lip-sync-audio", str(clip)], "no audio stream"),
        (["--lip-syncer", "wav2lip_96"], "has no audio track to lip sync to"),
        (["--lip-sync-audio", str(junk)], "needs a lip syncer"),
        (["--lip-syncer", "wav2lip_96", "--lip-sync-weight", "1.5"], "between 0 and 1"),
    ]
    for i, (extra, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        assert main([*base, "--output", str(out), *extra]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and "Traceback" not in err, err
        assert len(err.splitlines()) == 1, err
        assert not out.exists() or not any(out.glob("*.png"))


def test_a_model_with_the_wrong_contract_is_one_line(
    tmp_path: Path, speech: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import write_sidecar
    from ffdesk.runtime.standins import write_standin

    info = write_standin(load_catalog().get("xseg_1"), tmp_path)
    wrong = info.path.rename(tmp_path / "wav2lip_96.onnx")
    write_sidecar(wrong)
    args = ["render", "--target", str(carphone()), "--output", str(tmp_path / "out"), "--encoder", "png"]
    args += ["--no-resume", "-q", "--models-dir", str(tmp_path), "--lip-syncer", "wav2lip_96"]
    assert main([*args, "--lip-sync-audio", str(speech)]) != 0
    err = capsys.readouterr().err.strip()
    assert "missing input 'source'" in err and len(err.splitlines()) == 1


def test_edtalk_redraws_the_face_for_the_voice_and_its_weight(
    tmp_path: Path, pack: Path, speech: Path, silence: Path, plain: list[np.ndarray]
) -> None:
    """EDTalk takes the whole face and the weight as an input: the face's box changes, nothing
    outside it, speech differs from silence, and the weight changes the drawing."""
    talking = synced(tmp_path / "talk", pack, speech, "edtalk_256", *FIRST_SECOND)
    quiet = synced(tmp_path / "quiet", pack, silence, "edtalk_256", *FIRST_SECOND)
    n = len(talking)
    assert n == len(quiet) == 30
    masks = [changed(a, b) for a, b in zip(talking, plain[:n], strict=True)]
    assert sum(bool(m.any()) for m in masks) >= 25
    for m in masks:  # the face's box: more than the mouth, far less than the frame
        if m.any():
            assert m.sum() < 0.3 * m.size
    differ = [int(changed(a, b).sum()) for a, b in zip(talking, quiet, strict=True)]
    assert sum(d > 20 for d in differ) >= 15
    (tmp_path / "light").mkdir()
    light = render(
        tmp_path / "light" / "frames",
        *("--models-dir", str(pack), "--lip-syncer", "edtalk_256", "--lip-sync-audio", str(speech)),
        *("--lip-sync-weight", "0.1", *FIRST_SECOND),
    )
    darker = [
        float(p.astype(int).sum() - t.astype(int).sum()) - float(p.astype(int).sum() - li.astype(int).sum())
        for t, li, p in zip(talking, light, plain[:n], strict=True)
    ]
    assert np.mean(darker) > 0  # weight 0.5 darkens the mouth more than weight 0.1


def test_the_preview_after_an_in_point_hears_what_the_render_does(
    tmp_path: Path,
    pack: Path,
    speech: Path,
    plain: list[np.ndarray],
    run_env,  # type: ignore[no-untyped-def]
) -> None:
    """A render from an in point hears the voice from its first frame; the app's preview numbers
    frames from the clip's start, so the lip syncer is told where the range begins: the preview
    of the in point + k frames darkens the mouth as the render's frame k does (the stand-in
    darkens it by the window's loudness), not as its frame in point + k. Moving the in point
    builds a new previewer."""
    from dataclasses import replace

    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.preview import Previewer, same_processing

    start = 1.0  # 30 frames in (29.97 frames/s)
    rendered = render(
        tmp_path / "frames",
        *("--start", str(start), "--models-dir", str(pack), "--lip-syncer", "wav2lip_gan_96"),
        *("--lip-sync-audio", str(speech)),
    )
    job = RenderJob(
        target=carphone(),
        output=tmp_path / "unused.mp4",
        mode="final",
        start=start,
        models_dir=pack,
        lip_syncer="wav2lip_gan_96",
        lip_sync_audio=speech,
    )
    assert not same_processing(job, replace(job, start=2.0))
    assert same_processing(job, replace(job, quality=40))

    def darkening(after: np.ndarray, before: np.ndarray, where: np.ndarray) -> float:
        return float((before.astype(int) - after.astype(int))[where].mean())

    right = wrong = 0.0
    with Previewer(job, env=run_env) as p:
        first = round(start * p.fps)
        for k in range(0, 60, 6):
            shown = p.render((first + k) / p.fps)
            assert shown.index == first + k
            mouth = changed(shown.processed, shown.original)
            if mouth.sum() < 30:
                continue
            seen = darkening(shown.processed, shown.original, mouth)
            right += abs(seen - darkening(rendered[k], plain[first + k], mouth))
            wrong += abs(seen - darkening(rendered[first + k], plain[2 * first + k], mouth))
    assert right < 0.5 * wrong, (right, wrong)


def test_the_voice_is_taken_out_of_a_noisy_track_first(
    tmp_path: Path, pack: Path, speech: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As FaceFusion does, the lip syncer hears the voice the extractor takes out of its track:
    the sentence under a loud hum and whine gives nearly the mouths the clean sentence gives with
    the extractor (the kim_vocal_2 stand-in keeps the speech band), and other mouths without it.
    Without the extractor's file, `auto` says in one warning that the whole track is heard."""
    import shutil

    from ffdesk.media.voice import read_voice

    clean = read_voice(speech, sample_rate=22050)
    t = np.arange(clean.size) / 22050
    noisy_samples = clean + 0.5 * np.sin(2 * np.pi * 50 * t) + 0.3 * np.sin(2 * np.pi * 7000 * t)
    noisy = tmp_path / "noisy.wav"
    with wave.open(str(noisy), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        peak = float(np.abs(noisy_samples).max())
        w.writeframes((noisy_samples / peak * 30000).astype(np.int16).tobytes())
    folder = tmp_path / "pack"
    folder.mkdir()
    for name in ("wav2lip_gan_96.onnx", "wav2lip_gan_96.hash"):
        shutil.copy(pack / name, folder / name)
    write_standins(folder, ["kim_vocal_2"])

    def synced_with(voice: Path, extractor: str, out: str) -> list[np.ndarray]:
        (tmp_path / out).mkdir()
        extra = (
            "--models-dir",
            str(folder),
            "--lip-syncer",
            "wav2lip_gan_96",
            "--lip-sync-audio",
            str(voice),
        )
        return render(tmp_path / out / "frames", *extra, "--voice-extractor", extractor, *FIRST_SECOND)

    heard_clean = synced_with(speech, "kim_vocal_2", "clean")
    extracted = synced_with(noisy, "kim_vocal_2", "extracted")
    whole = synced_with(noisy, "none", "whole")
    near = np.mean(
        [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(extracted, heard_clean, strict=True)]
    )
    far = np.mean(
        [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(whole, heard_clean, strict=True)]
    )
    assert near < 0.5 * far, (near, far)
    capsys.readouterr()
    (tmp_path / "auto").mkdir()
    render(
        tmp_path / "auto" / "frames",
        *("--models-dir", str(pack), "--lip-syncer", "wav2lip_gan_96", "--lip-sync-audio", str(speech)),
        *("--end", "0.5"),
    )
    err = capsys.readouterr().err
    assert "kim_vocal_2.onnx (FaceFusion's voice extractor) is not in the models folder" in err
    args = ["render", "--target", str(carphone()), "--output", str(tmp_path / "x"), "--encoder", "png", "-q"]
    args += ["--models-dir", str(pack), "--lip-syncer", "wav2lip_gan_96", "--voice-extractor", "uvr_mdxnet"]
    assert main([*args, "--lip-sync-audio", str(speech)]) == 2
    assert "uvr_mdxnet" in capsys.readouterr().err


def test_the_voice_extraction_is_prepared_before_the_first_frame_with_progress(
    tmp_path: Path,
    pack: Path,
    speech: Path,
    run_env,  # type: ignore[no-untyped-def]
) -> None:
    """A long track through a real extractor takes a while: it runs when the stage prepares,
    before the first frame, and says how far it is (`Preparing`: chunk k of n)."""
    import shutil

    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    folder = tmp_path / "pack"
    folder.mkdir()
    for name in ("wav2lip_gan_96.onnx", "wav2lip_gan_96.hash"):
        shutil.copy(pack / name, folder / name)
    write_standins(folder, ["kim_vocal_2"])
    job = RenderJob(
        target=carphone(),
        output=tmp_path / "out.mp4",
        models_dir=folder,
        lip_syncer="wav2lip_gan_96",
        lip_sync_audio=speech,
        end=0.5,
        resume=False,
    )
    events: list[object] = []
    run_render(job, events.append, env=run_env)
    steps = [
        e for e in events if isinstance(e, ev.Preparing) and e.what.startswith("taking the voice out of")
    ]
    assert steps and "speech.wav (kim_vocal_2)" in steps[0].what
    assert steps[-1].step == steps[-1].steps >= 1
    first_frame = next(i for i, e in enumerate(events) if isinstance(e, ev.Progress))
    assert events.index(steps[-1]) < first_frame
