"""`--farm auto` (without RAY_ADDRESS) and `--farm local` start a Ray on this machine only. Ray's
`init()` without an address joins the cluster its last run here recorded in
/tmp/ray/ray_current_cluster: a head that died without `ray stop` left a render waiting for it
for ever, deaf to Ctrl-C, and a running head of someone else's took the job while the report
said "a local Ray on this machine"."""

from __future__ import annotations

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
    address._init(ray, farm, 2)  # type: ignore[arg-type]
    assert calls and calls[0]["address"] == "local" and calls[0]["num_cpus"] == 2


def test_a_head_address_is_joined() -> None:
    calls: list[dict[str, Any]] = []
    ray = SimpleNamespace(init=lambda **kwargs: calls.append(kwargs))
    address._init(ray, parse_farm("10.0.0.5:6379", {}), None)  # type: ignore[arg-type]
    assert calls[0]["address"] == "10.0.0.5:6379"
