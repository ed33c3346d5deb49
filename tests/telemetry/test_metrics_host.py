"""Where the metrics endpoint listens: this machine only, unless `--metrics-host` names more."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.telemetry.metrics import is_loopback, serve_metrics


def _bound_address(server: object) -> str:
    return str(server._server.socket.getsockname()[0])  # type: ignore[attr-defined]  # noqa: SLF001


def test_the_default_is_loopback_only() -> None:
    with serve_metrics(lambda: None, 0) as server:
        assert _bound_address(server) == "127.0.0.1" and server.loopback
        with urllib.request.urlopen(server.url, timeout=5) as resp:
            assert resp.status == 200


@pytest.mark.parametrize("host", ["", "  ", "[]"])
def test_an_empty_address_is_refused_not_every_interface(host: str) -> None:
    with pytest.raises(UserError, match="metrics address is empty"):
        serve_metrics(lambda: None, 0, host).close()


def test_every_interface_only_when_asked_and_it_says_so() -> None:
    with serve_metrics(lambda: None, 0, "0.0.0.0") as server:
        assert _bound_address(server) == "0.0.0.0" and not server.loopback


def test_ipv6_loopback() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with serve_metrics(lambda: None, 0, "::1") as server:
        assert server.loopback and server.url.startswith("http://[::1]:")
        with urllib.request.urlopen(server.url, timeout=5) as resp:
            assert resp.status == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("render-node-7", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _telemetry(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str]]:
    code = main(["telemetry", "--json", "--count", "1", "--interval", "0.02", "--metrics-port", "0", *extra])
    return code, capsys.readouterr().err.strip().splitlines()


def test_cli_serves_on_loopback_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _telemetry(capsys)
    assert code == 0
    assert any(line.startswith("serving metrics on http://127.0.0.1:") for line in err), err
    assert not any("warning" in line for line in err), err


def test_cli_warns_when_told_to_serve_every_interface(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _telemetry(capsys, "--metrics-host", "0.0.0.0")
    assert code == 0
    assert any(line.startswith("serving metrics on http://0.0.0.0:") for line in err), err
    assert any(
        line.startswith("ffdesk: warning: metrics on 0.0.0.0 can be read by anyone") for line in err
    ), err


def test_cli_refuses_an_empty_metrics_host_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _telemetry(capsys, "--metrics-host", "")
    assert code == 2 and len(err) == 1 and "metrics address is empty" in err[0]
