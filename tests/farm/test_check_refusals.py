"""Every farm worker checks a job before any segment is handed out. Where several refuse it (a
source photo without a face refuses on every worker), the first refusal is the user's one line,
and every worker's answer is read: a failed result nobody reads is printed by Ray, traceback and
all, when it is let go (`queue run --farm` printed one under the one-line error)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("ray")

from ray.exceptions import RayTaskError  # noqa: E402

from ffdesk.errors import UserError  # noqa: E402
from ffdesk.farm.head import _FarmRun  # noqa: E402


def _refusal(text: str) -> RayTaskError:
    return RayTaskError("check", "Traceback: ...", UserError(text))


def test_every_workers_refusal_is_read_and_the_first_is_said() -> None:
    answers = {"a": _refusal("no face found in grey.png"), "b": _refusal("no face found in grey.png")}
    read: list[str] = []

    def get(ref: str, timeout: float) -> None:
        read.append(ref)
        raise answers[ref]

    def worker(name: str) -> Any:
        check = SimpleNamespace(remote=lambda *_args: name)
        return SimpleNamespace(
            dropped=False,
            actor=SimpleNamespace(check=check),
            slot=SimpleNamespace(name=name, budget_bytes=None),
        )

    run = SimpleNamespace(
        workers=[worker("a"), worker("b")], lead_range=None, lead=None, job_json="{}",
        options=SimpleNamespace(stand_in=False), ray=SimpleNamespace(get=get),
    )  # fmt: skip
    with pytest.raises(UserError, match=r"^farm worker a \(no budget\) cannot take this job: no face found"):
        _FarmRun._check_job(run)  # type: ignore[arg-type]
    assert read == ["a", "b"]
