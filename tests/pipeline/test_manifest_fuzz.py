"""A seeded fuzzer over a resumed render's manifest.

A render of a small synthesized clip is interrupted once, after 3 of its 4 segments; each case puts
its work folder back as it was left, mutates `manifest.json` (a number changed by some amount or
to another type, records swapped, dropped or duplicated, a file renamed to a path outside the
folder or to no name at all, unknown keys, another fingerprint, the text cut or given random
bytes, nesting deeper than any file ffdesk writes) and runs the same command again. Every case
ends in a render (exit 0) whose output has every frame exactly once and in order (the synthesized
bar codes read back) or a one-line refusal (exit 2) with nothing at the output: never a traceback
or an internal error, and nothing outside the work folder and the output is touched. A render
reuses exactly the records before the first one the mutation changed: an edited record is never
trusted, an untouched one never thrown away.

The mutation helpers (`odd_value`, `odd_name`, `unknown_key`, `damage_text`, `nested`,
`with_nested`, `deep_depth`) are shared with the settings fuzzer (`tests/gui/test_settings_fuzz.py`).
`pytest -m slow tests/pipeline/test_manifest_fuzz.py -s` renders 1000 more mutants.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ffdesk import jsontext
from ffdesk.cli import build_parser, main
from ffdesk.commands.render import job_from_args
from ffdesk.errors import Cancelled
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import MANIFEST_NAME, lock_path_for, work_dir_for
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv
from tests.pipeline.test_render import decoded_indices

CASES = 30
FRAMES = 48
PER_SEGMENT = 12
RECORDED = 3
"""Segments the interrupted render finished (of FRAMES // PER_SEGMENT = 4)."""
NUMBERS = ("number", "frames", "first_pts", "last_pts", "size", "crc32")
KINDS = (
    "number-changed",
    "number-retyped",
    "records-swapped",
    "record-dropped",
    "record-duplicated",
    "file-renamed",
    "unknown-key",
    "fingerprint-changed",
    "text-cut",
    "bytes-inserted",
    "nested-deep",
)
"""Each case takes the kind its seed picks in turn (every kind is tried at least twice in 30), the
details from its own generator."""
DECOYS = {"x": b"not the renderer's x", "seg00001.mp4": b"not the renderer's segment", "abs.mp4": b"abs"}
"""Files beside the work folder that renamed records point at ("../x", an absolute path, ...)."""


# ---- mutations (shared with tests/gui/test_settings_fuzz.py) -------------------------------


def odd_value(rng: random.Random, old: Any) -> Any:
    """Something else where a number (or any value) was: another type, negative, huge, not finite."""
    number = old if type(old) is int else rng.randint(0, 10**6)
    return rng.choice(
        [
            str(number),
            number + 0.5,
            float(number),
            None,
            -number - 1,
            -rng.randint(1, 2**40),
            2**63,
            2**64 + 1,
            10**30,
            True,
            False,
            [number],
            {"value": number},
            "",
            float("nan"),
            float("inf"),
            -float("inf"),
        ]
    )


def odd_name(rng: random.Random, absolute: Path, other: str = "seg00001.mp4") -> Any:
    """A file name that is not a plain name of its own folder, or another one's, or not a name."""
    return rng.choice(
        [
            "../x",
            "../seg00001.mp4",
            str(absolute),
            "/etc/passwd",
            "",
            ".",
            "..",
            "a" * rng.randint(256, 5000),
            "seg\x0000001.mp4",
            "seg00001.mp4\x00",
            "seg00000.mp4/../seg00001.mp4",
            "sub\\seg00001.mp4",
            "~nosuchuser-ffdesk/x",
            "~",
            ".hidden.mp4",
            "SEG00001.MP4",
            other,
            "seg00001.mp4 ",
            "séq00001.mp4",
            7,
            None,
            ["seg00001.mp4"],
        ]
    )


def nested(depth: int, inner: str = "0") -> str:
    """JSON text: `inner` (JSON text) inside `depth` lists and objects, in turn."""
    opening = "".join('{"k": ' if i % 2 else "[" for i in range(depth))
    closing = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return opening + inner + closing


def deep_depth(rng: random.Random) -> int:
    """Deeper than ffdesk reads (64), up to far past Python's own limit (about 1000)."""
    return rng.choice([65, 100, 1200, 100_000])


def with_nested(data: Any, at: Callable[[Any, Callable[[Any], str]], None], depth: int) -> str:
    """`data` as JSON text, the value `at(data, placeholder)` puts somewhere nested `depth` deep
    (as text: Python's own encoder recurses too)."""
    holder = "\x00nested\x00"
    inner: list[str] = []

    def put(value: Any) -> str:
        inner.append(json.dumps(value))
        return holder

    at(data, put)
    return json.dumps(data).replace(json.dumps(holder), nested(depth, inner[0]), 1)


def damage_text(rng: random.Random, raw: bytes, kind: str) -> bytes:
    """Byte-level damage: "text-cut" (at a random byte), "bytes-inserted" (1-64 random bytes at a
    random place), "bytes-flipped" or "random-bytes" (the whole file)."""
    if kind == "text-cut":
        return raw[: rng.randrange(len(raw))]
    if kind == "bytes-inserted":
        at = rng.randint(0, len(raw))
        return raw[:at] + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))) + raw[at:]
    if kind == "bytes-flipped":
        out = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "random-bytes":
        return bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 16, 100, 1000, 4096])))
    raise ValueError(kind)


def unknown_key(rng: random.Random) -> str:
    """A key no version of ffdesk writes (empty, very long, NUL, non-ASCII among them)."""
    return rng.choice(["extra", "", "comment", "__proto__", "segments2", "k" * 300, "\x00", "ñ"])


# ---- the manifest's own ---------------------------------------------------------------------


def mutate_manifest(raw: bytes, rng: random.Random, kind: str, outside: Path) -> tuple[bytes, str]:
    """The manifest's text with one mutation of `kind`, and what it did (for a failing case)."""
    if kind in ("text-cut", "bytes-inserted"):
        out = damage_text(rng, raw, kind)
        return out, f"{kind}: {len(raw)} -> {len(out)} bytes"
    data = json.loads(raw)
    records: list[dict[str, Any]] = data["segments"]
    i = rng.randrange(len(records))
    how: str
    if kind == "number-changed":
        key = rng.choice(NUMBERS)
        delta = rng.choice([1, -1, 512, -512, PER_SEGMENT, rng.randint(-(10**6), 10**6) or 7])
        records[i][key] += delta
        how = f"segment {i} {key} {delta:+d}"
    elif kind == "number-retyped":
        key = rng.choice(NUMBERS)
        records[i][key] = odd_value(rng, records[i][key])
        how = f"segment {i} {key} = {records[i][key]!r}"
    elif kind == "records-swapped":
        j = rng.choice([k for k in range(len(records)) if k != i])
        records[i], records[j] = records[j], records[i]
        how = f"records {i} and {j} swapped"
    elif kind == "record-dropped":
        del records[i]
        how = f"record {i} dropped"
    elif kind == "record-duplicated":
        j = rng.randint(0, len(records))
        records.insert(j, copy.deepcopy(records[i]))
        how = f"record {i} copied to place {j}"
    elif kind == "file-renamed":
        records[i]["file"] = odd_name(rng, outside, records[(i + 1) % len(records)]["file"])
        how = f"segment {i} file = {str(records[i]['file'])[:80]!r}"
    elif kind == "unknown-key":
        where = rng.choice(["top", "record"])
        key, value = unknown_key(rng), odd_value(rng, 0)
        (data if where == "top" else records[i])[key] = value
        how = f"{where} {'' if where == 'top' else i} key {key[:20]!r} = {value!r}"
    elif kind == "fingerprint-changed":
        choice = rng.choice(["other", "dropped", "retyped"])
        if choice == "dropped":
            del data["fingerprint"]
        elif choice == "other":
            data["fingerprint"] = f"{rng.getrandbits(64):016x}"
        else:
            data["fingerprint"] = odd_value(rng, 0)
        how = f"fingerprint {choice}: {data.get('fingerprint')!r}"
    elif kind == "nested-deep":
        where = rng.choice(["whole", "segments", "record", "value"])
        depth = deep_depth(rng)
        key = rng.choice(NUMBERS)

        def at(d: Any, put: Callable[[Any], str]) -> None:
            if where == "segments":
                d["segments"] = put(d["segments"])
            elif where == "record":
                d["segments"][i] = put(d["segments"][i])
            else:
                d["segments"][i][key] = put(d["segments"][i][key])

        if where == "whole":
            return nested(depth, raw.decode()).encode(), f"{kind}: the whole file {depth} deep"
        return with_nested(data, at, depth).encode(), f"{kind}: {where} {i} {key} {depth} deep"
    else:
        raise ValueError(kind)
    return json.dumps(data).encode(), f"{kind}: {how}"


def reusable(raw: bytes, original: dict[str, Any]) -> tuple[int, bool]:
    """How many segments a resumed render may reuse from `raw`: the records before the first
    the mutation changed (types included: 12.0 is not 12), 0 where the file is no manifest of
    this render (unreadable, nested deeper than 64, another fingerprint); and whether a record
    it does not reuse is there to be named ("segment N ...: rendering it ... again")."""
    try:
        data = jsontext.loads(raw.decode("utf-8"))
        records, fingerprint = data["segments"], str(data["fingerprint"])
    except (ValueError, KeyError, TypeError):
        return 0, False
    if fingerprint != original["fingerprint"] or not isinstance(records, list):
        return 0, False
    kept = 0
    for record, was in zip(records, original["segments"], strict=False):
        if json.dumps(record, sort_keys=True) != json.dumps(was, sort_keys=True):
            break
        kept += 1
    return kept, kept < len(records)


# ---- the interrupted render -------------------------------------------------------------------


class PassThrough:
    """A stage that passes frames on; with `cancel`, it stops the render once the manifest lists
    `RECORDED` segments (waiting for them after `at` frames, so the cut falls in the same place
    however busy the machine is)."""

    name = "pass"
    max_batch = 1
    edits_regions = False
    workers = 1

    def __init__(self, manifest: Path | None = None, cancel: threading.Event | None = None, at: int = 0):
        self.manifest = manifest
        self.cancel = cancel
        self.at = at
        self.seen = 0

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        self.seen += len(batch)
        cancel, manifest = self.cancel, self.manifest
        if cancel is not None and manifest is not None and self.seen >= self.at and not cancel.is_set():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and _recorded(manifest) < RECORDED:
                time.sleep(0.01)
            cancel.set()
        return list(batch)

    def finish(self) -> None:
        return None


def _recorded(manifest: Path) -> int:
    try:
        return len(json.loads(manifest.read_text())["segments"])
    except (OSError, ValueError, KeyError):
        return 0


@dataclass(frozen=True)
class Interrupted:
    """A render stopped after `RECORDED` segments, a copy of its work folder, and the command
    line that renders it again."""

    root: Path
    job: RenderJob
    argv: list[str]
    saved: Path

    @property
    def work(self) -> Path:
        return work_dir_for(self.job.output)

    def restore(self) -> bytes:
        """The work folder as the interrupted render left it, nothing at the output; the manifest."""
        shutil.rmtree(self.work, ignore_errors=True)
        self.job.output.unlink(missing_ok=True)
        shutil.copytree(self.saved, self.work)
        return (self.work / MANIFEST_NAME).read_bytes()

    def outside(self) -> dict[str, str]:
        """Every file under the root but the render's own (work folder, output, lock): its digest."""
        own = {self.work, self.job.output, lock_path_for(self.work)}
        return {
            str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.root.rglob("*"))
            if not any(p == o or o in p.parents for o in own) and p.is_file()
        }


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Interrupted]:
    root = tmp_path_factory.mktemp("manifest-fuzz")
    clip = root / "clip.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=FRAMES, audio_streams=1)
    for name, data in DECOYS.items():
        (root / name).write_bytes(data)
    out = root / "out.mp4"
    argv = ["render", "--target", str(clip), "--output", str(out), "--segment-frames", str(PER_SEGMENT), "-q"]
    job = job_from_args(build_parser().parse_args(argv))  # the command line's job: its fingerprint
    cancel = threading.Event()
    stop = PassThrough(work_dir_for(out) / MANIFEST_NAME, cancel, at=RECORDED * PER_SEGMENT + 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ffdesk.pipeline.engine.build_stages", lambda *_a, **_k: [stop])
        # as a killed render leaves it: whole segments only (a cancel would keep the one it cut short)
        mp.setattr("ffdesk.pipeline.resume.Manifest.keeps_cancelled_segment", False)
        with pytest.raises(Cancelled):
            run_render(job, None, cancel, env=RuntimeEnv.in_folder(tmp_path_factory.mktemp("env")))
    saved = root / "saved"
    shutil.copytree(work_dir_for(out), saved)
    records = json.loads((saved / MANIFEST_NAME).read_text())["segments"]
    assert [r["frames"] for r in records] == [PER_SEGMENT] * RECORDED, records
    assert not out.exists()
    yield Interrupted(root, job, argv, saved)


# ---- the cases ----------------------------------------------------------------------------------

SEEN: list[str] = []
"""How each case ended, printed after the module's tests (`-s` shows it)."""


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    print("\n" + "\n".join(SEEN))


@dataclass
class Ended:
    """How one case ended: "rendered" or "refused"."""

    how: str
    resumed: int
    detail: str
    mutation: str = ""


def _run(interrupted: Interrupted, report: Path, capsys: pytest.CaptureFixture[str], mutation: str) -> Ended:
    code = main([*interrupted.argv, "--report", str(report)])
    captured = capsys.readouterr()
    err = captured.err
    where = f"{mutation}: exit {code}: {err[-1500:]}"
    assert code in (0, 2), where
    assert "Traceback" not in err and "internal error" not in err, where
    lines = [line for line in err.strip().splitlines() if not line.startswith("ffdesk: warning: ")]
    out = interrupted.job.output
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("ffdesk: error: "), where
        assert not out.exists(), where
        return Ended("refused", 0, lines[0])
    assert lines == [], where
    assert f"({FRAMES} frames, " in captured.out, where
    assert decoded_indices(out) == list(range(FRAMES)), where  # every frame once, in order
    assert not interrupted.work.exists(), where
    figures = json.loads(report.read_text())
    assert figures["frames_out"] == FRAMES, where
    notes = [line for line in err.splitlines() if line.startswith("ffdesk: warning: segment ")]
    assert len(notes) <= 1, where
    return Ended("rendered", figures["resumed_segments"], notes[0] if notes else "")


def _case(seed: int, interrupted: Interrupted, report: Path, capsys: pytest.CaptureFixture[str]) -> Ended:
    """Mutate the manifest as `seed` says, render again, check how it ended (build_stages patched)."""
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    original = interrupted.restore()
    raw, mutation = mutate_manifest(original, rng, kind, interrupted.root / "abs.mp4")
    assert raw != original, mutation
    (interrupted.work / MANIFEST_NAME).write_bytes(raw)
    before = interrupted.outside()
    report.unlink(missing_ok=True)
    ended = _run(interrupted, report, capsys, f"seed {seed} {mutation}")
    assert interrupted.outside() == before, mutation  # the clip, the decoys, the saved copy
    if ended.how == "rendered":
        expected, named = reusable(raw, json.loads(original))
        assert ended.resumed == expected, (mutation, ended)
        if named:  # the first record it did not reuse is named, in one line
            assert ended.detail.startswith(f"ffdesk: warning: segment {expected} "), (mutation, ended)
    ended.mutation = mutation
    return ended


@pytest.mark.parametrize("seed", range(CASES))
def test_a_mutated_manifest_is_rendered_whole_or_refused_in_one_line(
    seed: int,
    interrupted: Interrupted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_a, **_k: [PassThrough()])
    ended = _case(seed, interrupted, tmp_path / "report.json", capsys)
    SEEN.append(f"seed {seed}: {ended.mutation[:90]} -> {ended.how}, {ended.resumed} reused")


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_thousand_mutated_manifests_render_whole_or_are_refused(
    interrupted: Interrupted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`pytest -m slow tests/pipeline/test_manifest_fuzz.py -s`: seeds 30 to 1029, failures listed."""
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_a, **_k: [PassThrough()])
    failures: list[str] = []
    counts: Counter[str] = Counter()
    for seed in range(CASES, CASES + 1000):
        try:
            counts[_case(seed, interrupted, tmp_path / "report.json", capsys).how] += 1
        except AssertionError as exc:
            counts["failed"] += 1
            failures.append(f"seed {seed}: {str(exc)[:400]}")
    SEEN.append(f"{sum(counts.values())} mutants: {dict(counts)}")
    assert not failures, "\n".join(failures[:20])


def test_the_mutations_are_seeded_and_change_the_manifest(interrupted: Interrupted) -> None:
    original = (interrupted.saved / MANIFEST_NAME).read_bytes()
    outside = interrupted.root / "abs.mp4"

    def all_cases() -> list[bytes]:
        return [
            mutate_manifest(original, random.Random(s), KINDS[s % len(KINDS)], outside)[0]
            for s in range(CASES)
        ]

    first = all_cases()
    assert first == all_cases()
    assert all(m != original for m in first)
    assert reusable(original, json.loads(original)) == (RECORDED, False)
