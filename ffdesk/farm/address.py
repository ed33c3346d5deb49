"""What `--farm` names: a Ray head (`HOST:PORT`, optionally `TOKEN@HOST:PORT`) or `auto`.

`auto` is `RAY_ADDRESS` when it is set, else a Ray started on this machine only. Ray 2.60 checks
a token on every connection: the token comes from `TOKEN@` in the address, else from Ray's own
places (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`); `connected()` turns
token mode on whenever a token is known, and a local Ray makes its own. A head that does not
take a connection, a port that is not a Ray head's (it does not speak gRPC) and a token the head
refuses each fail in seconds (`check_reachable`, `_check_token`), where Ray's own connect retries
for minutes.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ffdesk.errors import UserError
from ffdesk.farm.ray_support import NAMESPACE, require_ray

_HOST_PORT = re.compile(
    r"^(?:(?P<token>[^@\s]+)@)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d+)$"
)


@dataclass(frozen=True)
class FarmAddress:
    """Where the farm's head is (`None`: a Ray on this machine only) and the token, if given."""

    address: str | None
    token: str | None = None

    @property
    def label(self) -> str:
        """The address as shown to the user (never the token)."""
        return self.address or "a local Ray on this machine"


def parse_farm(text: str, environ: dict[str, str] | None = None, *, what: str = "--farm") -> FarmAddress:
    """`auto`, `local`, `HOST:PORT` or `TOKEN@HOST:PORT`; `UserError` for anything else, naming
    `what` (the option or argument it came from) and never the token."""
    env = os.environ if environ is None else environ
    value = text.strip()
    if value == "auto":
        ray_address = env.get("RAY_ADDRESS", "").strip()
        if not ray_address or ray_address == "auto":
            return FarmAddress(None)
        value = ray_address
    if value == "local":
        return FarmAddress(None)
    match = _HOST_PORT.match(value)
    if match is None or not 0 < int(match["port"]) < 65536:
        shown = text if "@" not in text else "TOKEN@" + text.rsplit("@", 1)[1]
        raise UserError(f"{what} {shown!r}: expected HOST:PORT of the Ray head (or auto)")
    return FarmAddress(f"{match['host']}:{int(match['port'])}", match["token"])


def _token_known(environ: dict[str, str] | os._Environ[str]) -> bool:
    if environ.get("RAY_AUTH_TOKEN"):
        return True
    path = environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


@contextlib.contextmanager
def connected(farm: FarmAddress, *, local_cpus: int | None = None) -> Iterator[ModuleType]:
    """Connect this process to the farm (or start a local Ray) for the block; yields `ray`.

    A process already connected (a benchmark that started its own cluster) is used as it is and
    left connected. Connection and token failures are `UserError`s of one line."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    check_reachable(farm)
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    stack = contextlib.ExitStack()
    if farm.token:
        os.environ["RAY_AUTH_TOKEN"] = farm.token
    if farm.token or (os.environ.get("RAY_AUTH_MODE") is None and _token_known(os.environ)):
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        _reload_auth()
        if farm.address is not None:
            _check_token(farm)
        empty = Path(tempfile.mkdtemp(prefix="ffdesk-farm-"))
        stack.callback(shutil.rmtree, empty, True)
        try:
            with _signals_kept():
                _init(ray, farm, local_cpus, empty)
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; the user needs one line
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"cannot reach the farm at {farm.label}: {reason}") from None
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        stack.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _reload_auth()


def _init(ray: ModuleType, farm: FarmAddress, local_cpus: int | None, empty: Path) -> None:
    """Connect this process to the farm's head, or start a Ray on this machine only. "local"
    tells Ray to start its own: with no address it would join the cluster its last run on this
    machine recorded (/tmp/ray/ray_current_cluster), a head that may have died without `ray
    stop` (Ray then waits for it for ever, deaf to Ctrl-C) or someone else's running head.

    `empty`, an empty private folder, is the job's working folder: without one, Ray puts the
    folder this process runs in first on every worker's import path, on every node (a farm
    render started in a downloaded pack's folder holding an `ffdesk/` folder ran its code on
    the workers)."""
    env = {"working_dir": str(empty)}
    if farm.address is None:
        ray.init(
            address="local",
            num_cpus=local_cpus,
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            runtime_env=env,
        )
    else:
        ray.init(
            address=farm.address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.ERROR,
            runtime_env=env,
        )


def _reload_auth() -> None:
    """Make this process read `RAY_AUTH_MODE` and the token again: Ray reads them once, when it
    is imported, so a mode or token set afterwards (from the address, or a token file found)
    would otherwise not be used."""
    raylet = _raylet()
    try:
        config, loader = raylet.Config, raylet.AuthenticationTokenLoader
    except AttributeError:  # a Ray other than the pinned one: its own reading stands
        return
    config.initialize("")
    loader.instance().reset_cache()


def _raylet() -> Any:
    """Ray's native module (its type stubs leave out the parts used here)."""
    return importlib.import_module("ray._raylet")


def _check_token(farm: FarmAddress) -> None:
    """`UserError` when the head refuses this process's token (or the lack of one): Ray's own
    connect would retry for half a minute and then only say that it could not connect."""
    from ray.exceptions import AuthenticationError

    try:
        with _native_stderr_silenced():  # Ray's C++ logs the refusal as well, on a line of its own
            _raylet().GcsClient(address=farm.address)
    except AuthenticationError:
        how = "this token" if os.environ.get("RAY_AUTH_MODE") == "token" else "a connection without a token"
        raise UserError(
            f"the farm at {farm.label} refused {how}: give the head's token (TOKEN@{farm.address}, "
            "RAY_AUTH_TOKEN or ~/.ray/auth_token)"
        ) from None
    except Exception:  # noqa: BLE001 - anything else is for Ray's own connect to report
        return


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Send what native code writes to the standard error to nowhere, for the block."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Keep this process's SIGTERM handler across `ray.init`, which puts in one of its own that
    exits at once (a farm render would not stop its workers, nor keep its segments resumable)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


REACH_TIMEOUT_S = 5.0
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
"""What a gRPC client sends first: HTTP/2's connection preface and an empty SETTINGS frame."""
_SETTINGS_FRAME = 0x04


def check_reachable(farm: FarmAddress, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Nothing when the head's port takes a connection within `timeout_s` and answers as a Ray
    head does (gRPC: its first frame is HTTP/2 SETTINGS), or the farm is a Ray started on this
    machine; else `UserError`: "cannot reach the farm at HOST:PORT: why"."""
    if farm.address is None:
        return
    host, _, port = farm.address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            if _ray_uses_tls():
                return  # the head speaks TLS first: Ray's connect checks the rest
            conn.sendall(_HTTP2_PREFACE)
            first = _read_up_to(conn, 9)
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    else:
        if len(first) == 9 and first[3] == _SETTINGS_FRAME:
            return
        reason = "this port is not a Ray head's (it does not answer as Ray's GCS does)"
    raise UserError(f"cannot reach the farm at {farm.label}: {reason}")


def _ray_uses_tls() -> bool:
    return os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true")


def _read_up_to(conn: socket.socket, size: int) -> bytes:
    """Up to `size` bytes, fewer when the peer closes first."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data
