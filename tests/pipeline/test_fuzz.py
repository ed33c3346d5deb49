"""Hostile media: mutated clips of each container we read, each rendered by the command line.

Every render must end with exit 0 (an output that plays) or exit 2 with one error line, within a
time limit, leave its source untouched and, when refused, nothing at the output path: never a
traceback, an internal error, a hang or a crash of the interpreter. The short variant runs in CI;
the long one (`pytest -m slow tests/pipeline/test_fuzz.py -s`) renders 1000 mutants and prints
what it saw. Both use fixed seeds, so a failure names a file that can be made again.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.media import fuzz

ROOT = Path(__file__).resolve().parents[2]
TIME_LIMIT_S = 90


@dataclass(frozen=True)
class Outcome:
    mutant: str
    how: str
    kind: str  # "rendered", "refused", or what went wrong
    detail: str


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("fuzz-seeds")
    return {s.name: fuzz.write_seed(s, folder).read_bytes() for s in fuzz.SEEDS}


def _render(mutant: fuzz.Mutant, folder: Path) -> Outcome:
    src = folder / mutant.name
    src.write_bytes(mutant.data)
    digest = hashlib.sha256(mutant.data).hexdigest()
    out = folder / f"{mutant.name}.out.mp4"
    cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(src), "--output", str(out), "-q"]
    env = {**os.environ, **{f"XDG_{k}_HOME": str(folder / k.lower()) for k in ("CACHE", "DATA", "CONFIG")}}
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return Outcome(mutant.name, mutant.how, "hang", f"no exit after {TIME_LIMIT_S} s")
    err = run.stderr.strip()
    lines = err.splitlines()
    errors = [ln for ln in lines if not ln.startswith("ffdesk: warning:")]
    kind, detail = "rendered", ""
    if hashlib.sha256(src.read_bytes()).hexdigest() != digest:
        kind, detail = "source modified", ""
    elif "Traceback" in err or "internal error" in err:
        kind, detail = "traceback", err[-2000:]
    elif run.returncode < 0:
        kind, detail = "interpreter crash", f"signal {-run.returncode}: {err[-500:]}"
    elif run.returncode == 0:
        if not out.exists() or errors:
            kind, detail = "exit 0 without output", err
    elif run.returncode == 2:
        leftovers = sorted(p.name for p in folder.iterdir() if p.name.startswith(out.name))
        if len(errors) != 1 or not errors[0].startswith("ffdesk: error: "):
            kind, detail = "not one error line", err
        elif out.exists() or any(".partial" in n for n in leftovers):
            kind, detail = "half-written output", ", ".join(leftovers)
        else:
            kind, detail = "refused", errors[0]
    else:
        kind, detail = f"exit {run.returncode}", err[-2000:]
    if kind in ("rendered", "refused"):
        src.unlink()
        out.unlink(missing_ok=True)
    return Outcome(mutant.name, mutant.how, kind, detail)


def _campaign(seeds: dict[str, bytes], per_seed: int, seed: int, folder: Path) -> list[Outcome]:
    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda m: _render(m, folder), fuzz.mutants(seeds, per_seed, seed)))


def _summary(outcomes: list[Outcome]) -> str:
    counts = Counter(o.kind for o in outcomes)
    lines = [f"{len(outcomes)} mutants: " + ", ".join(f"{n} {k}" for k, n in counts.most_common())]
    by_seed = Counter((o.mutant.rsplit("_", 1)[0], o.kind) for o in outcomes)
    lines += [f"  {s}: {n} {k}" for (s, k), n in sorted(by_seed.items())]
    reasons = Counter(_reason(o)[:90] for o in outcomes if o.kind == "refused")
    lines += ["  most common refusals:"] + [f"    {n:4d}  {r}" for r, n in reasons.most_common(8)]
    return "\n".join(lines)


def _reason(o: Outcome) -> str:
    """The refusal without the file's path, so equal reasons count together."""
    return o.detail.split(o.mutant, 1)[-1].lstrip(": ") or o.detail


def _failures(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.kind not in ("rendered", "refused")]


def test_mutated_clips_render_or_are_refused_in_one_line(seeds: dict[str, bytes], tmp_path: Path) -> None:
    outcomes = _campaign(seeds, per_seed=3, seed=2026, folder=tmp_path)
    print(_summary(outcomes))
    bad = _failures(outcomes)
    assert not bad, "\n".join(f"{o.mutant} ({o.how}): {o.kind}: {o.detail}" for o in bad)
    # the mutations are not all harmless, nor all fatal: both paths are exercised
    kinds = {o.kind for o in outcomes}
    assert kinds == {"rendered", "refused"}, _summary(outcomes)


def test_ffmpegs_lines_without_a_context_do_not_reach_stderr(seeds: dict[str, bytes], tmp_path: Path) -> None:
    """A Matroska file with bytes inserted (a mutant this campaign made): FFmpeg cut a packet
    longer than the file had left and printed "Truncating packet of size 847117 to 11791" on
    the render's stderr, bare, beside ffdesk's own warnings (it logs that without a context,
    so it was not known for FFmpeg's)."""
    (mutant,) = [m for m in fuzz.mutants(seeds, 3, seed=2026) if m.name == "mkv_h264_flac_0000.mkv"]
    outcome = _render(mutant, tmp_path)
    assert outcome.kind == "rendered", outcome


def test_the_mutations_hit_the_structure_they_aim_at(seeds: dict[str, bytes]) -> None:
    boxes = fuzz.bmff_boxes(seeds["mp4_h264_aac.mp4"])
    assert {"ftyp", "moov", "trak", "stbl", "stsz", "mdat"} <= {b.kind for b in boxes}
    chunks = fuzz.riff_chunks(seeds["avi_mpeg4_bframes_pcm.avi"])
    assert {"LIST", "avih", "strh", "00dc", "01wb", "idx1"} <= {c.kind for c in chunks}
    first = [m.data for m in fuzz.mutants(seeds, 3, seed=7)]
    again = [m.data for m in fuzz.mutants(seeds, 3, seed=7)]
    assert first == again and len(set(first)) == len(first)
    assert all(d not in seeds.values() for d in first)


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_a_thousand_mutated_clips_render_or_are_refused_in_one_line(
    seeds: dict[str, bytes], tmp_path: Path
) -> None:
    outcomes = _campaign(seeds, per_seed=200, seed=20261201, folder=tmp_path)
    print(_summary(outcomes))
    bad = _failures(outcomes)
    assert not bad, "\n".join(f"{o.mutant} ({o.how}): {o.kind}: {o.detail}" for o in bad[:20])
