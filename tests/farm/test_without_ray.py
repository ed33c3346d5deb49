"""Without Ray installed, `--farm` and `farm status` say how to install it, in one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.farm.address import FarmAddress, parse_farm

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI with an import hook that makes `import ray` fail, as on a machine without it.
_BLOCK_RAY = """
import sys
class _NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoRay())
from ffdesk.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def run_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_RAY, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_render_on_a_farm_without_ray_exits_2_with_the_install_line(tmp_path: Path) -> None:
    done = run_without_ray(
        "render",
        "--target",
        str(tmp_path / "clip.mp4"),
        "--output",
        str(tmp_path / "o.mp4"),
        "--farm",
        "auto",
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'ffdesk[farm]'" in lines[0] and "Ray" in lines[0]
    assert done.stdout == ""


def test_farm_status_without_ray_exits_2_with_the_install_line() -> None:
    done = run_without_ray("farm", "status", "127.0.0.1:6379")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "ffdesk[farm]" in done.stderr


def test_a_local_render_does_not_need_ray(tmp_path: Path) -> None:
    from ffdesk.media.synth import synth_clip

    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=36, fps=25, frames=5, audio_streams=0)
    done = run_without_ray("render", "--target", str(clip), "--output", str(tmp_path / "o.mp4"), "-q")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o.mp4").is_file()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.5:6379", FarmAddress("10.0.0.5:6379")),
        ("secret123@head.studio:6380", FarmAddress("head.studio:6380", "secret123")),
        ("local", FarmAddress(None)),
        ("auto", FarmAddress(None)),
    ],
)
def test_farm_addresses(text: str, expected: FarmAddress) -> None:
    assert parse_farm(text, environ={}) == expected


def test_auto_takes_ray_address() -> None:
    assert parse_farm("auto", environ={"RAY_ADDRESS": "10.1.2.3:6379"}) == FarmAddress("10.1.2.3:6379")


@pytest.mark.parametrize("text", ["", "head", "head:", "head:99999", "a b:1", "http://x:1"])
def test_bad_farm_addresses_are_refused(text: str) -> None:
    with pytest.raises(UserError, match="--farm"):
        parse_farm(text, environ={})


def test_a_bad_address_is_named_as_given_without_its_token(capsys: pytest.CaptureFixture[str]) -> None:
    # the refusal echoed the whole text, the head's token with it, into logs and terminals
    with pytest.raises(UserError) as refused:
        parse_farm("s3cret-token@head", environ={})
    assert str(refused.value) == "--farm 'TOKEN@head': expected HOST:PORT of the Ray head (or auto)"
    assert main(["farm", "status", "nonsense"]) == 2  # a positional address, not --farm
    assert capsys.readouterr().err.strip() == (
        "ffdesk: error: farm address 'nonsense': expected HOST:PORT of the Ray head (or auto)"
    )


def test_farm_status_auto_without_a_farm_starts_no_ray(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # it started a whole Ray on this machine (seconds) to print that nothing had run there
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["farm", "status", "auto"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ffdesk: error: farm address 'auto': no running farm to ask (RAY_ADDRESS is not set); "
        "give the head's HOST:PORT"
    )


def test_bench_farm_without_ray_exits_2_with_the_install_line() -> None:
    done = run_without_ray("bench", "farm", "--workers", "1,2")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "ffdesk[farm]" in done.stderr


def test_bench_farm_refuses_bad_farm_sizes() -> None:
    from ffdesk.bench.farm import _sizes

    assert _sizes("4,1,2,2") == [1, 2, 4]
    for text in ("", "0", "a,b", "-1,2"):
        with pytest.raises(UserError, match="--workers"):
            _sizes(text)


def test_lip_sync_on_a_farm_that_ships_the_clip_is_one_line(tmp_path: Path) -> None:
    """A shipped clip carries its video only: a lip syncer there would have no voice. Refused
    before anything is sent (and before Ray is needed)."""
    from ffdesk.farm.head import FarmOptions, run_farm_render
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(target=tmp_path / "clip.mp4", output=tmp_path / "out.mp4", lip_syncer="wav2lip_gan_96")
    with pytest.raises(UserError, match="--lip-syncer on the farm needs --farm-storage shared"):
        run_farm_render(job, parse_farm("127.0.0.1:10001"), options=FarmOptions(ship_source=True))
