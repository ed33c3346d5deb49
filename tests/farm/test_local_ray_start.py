"""`--farm auto` (without RAY_ADDRESS) and `--farm local` start a Ray on this machine only. Ray's
`init()` without an address joins the cluster its last run here recorded in
/tmp/ray/ray_current_cluster: a head that died without `ray stop` left a render waiting for it
for ever, deaf to Ctrl-C, and a running head of someone else's took the job while the report
said "a local Ray on this machine"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ffdesk.farm import address
from ffdesk.farm.address import FarmAddress, parse_farm


@pytest.mark.parametrize(
    ("given", "environ"), [("auto", {}), ("auto", {"RAY_ADDRESS": "auto"}), ("local", {})]
)
def test_a_local_farm_asks_ray_for_a_ray_of_its_own(given: str, environ: dict[str, str]) -> None:
    calls: list[dict[str, Any]] = []
    ray = SimpleNamespace(init=lambda **kwargs: calls.append(kwargs))
    farm = parse_farm(given, environ)
    assert farm == FarmAddress(None)
    address._init(ray, farm, 2, Path("/nowhere"))  # type: ignore[arg-type]
    assert calls and calls[0]["address"] == "local" and calls[0]["num_cpus"] == 2


def test_a_head_address_is_joined() -> None:
    calls: list[dict[str, Any]] = []
    ray = SimpleNamespace(init=lambda **kwargs: calls.append(kwargs))
    address._init(ray, parse_farm("10.0.0.5:6379", {}), None, Path("/nowhere"))  # type: ignore[arg-type]
    assert calls[0]["address"] == "10.0.0.5:6379"
    assert calls[0]["runtime_env"] == {"working_dir": "/nowhere"}


WORKER_PATH = textwrap.dedent(
    """
    from ffdesk.farm.address import FarmAddress, connected

    with connected(FarmAddress(None), local_cpus=1) as ray:
        def look():
            import sys
            try:
                import planted  # noqa: F401
                return "imported the planted module"
            except ImportError:
                return "clean"
        print("RESULT", ray.get(ray.remote(look).remote(), timeout=120))
    """
)


def test_workers_never_import_from_the_folder_the_render_was_started_in(tmp_path: Path) -> None:
    """Ray put the driver's current folder first on every worker's import path, on every node:
    a farm render started in a downloaded pack's folder ran the code planted there."""
    pytest.importorskip("ray")
    from .cluster import namespace_works

    if not namespace_works():
        pytest.skip("needs `unshare -n -p` (root) to keep Ray on loopback")
    planted = tmp_path / "pack"
    planted.mkdir()
    (planted / "planted.py").write_text("")
    script = tmp_path / "look.py"
    script.write_text(WORKER_PATH)
    command = f"ip link set lo up && exec {sys.executable} {script}"
    done = subprocess.run(
        ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c", command],
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "RESULT clean" in done.stdout, (done.stdout[-2000:], done.stderr[-3000:])
