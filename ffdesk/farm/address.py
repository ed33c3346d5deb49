"""What `--farm` names: a Ray head (`HOST:PORT`, optionally `TOKEN@HOST:PORT`) or `auto`.

`auto` is `RAY_ADDRESS` when it is set, else a Ray started on this machine only. Ray 2.60 checks
a token on every connection: the token comes from `TOKEN@` in the address, else from Ray's own
places (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`); `connected()` turns
token mode on whenever a token is known, and a local Ray makes its own. A head that does not
take a connection fails in seconds (`check_reachable`), where Ray's own connect retries for
minutes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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


def parse_farm(text: str, environ: dict[str, str] | None = None) -> FarmAddress:
    """`auto`, `local`, `HOST:PORT` or `TOKEN@HOST:PORT`; `UserError` for anything else."""
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
        raise UserError(f"--farm {text!r}: expected HOST:PORT of the Ray head (or auto)")
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
    if farm.token:
        os.environ["RAY_AUTH_TOKEN"] = farm.token
    if farm.token or (os.environ.get("RAY_AUTH_MODE") is None and _token_known(os.environ)):
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        try:
            if farm.address is None:
                ray.init(
                    num_cpus=local_cpus,
                    namespace=NAMESPACE,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
            else:
                ray.init(
                    address=farm.address,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; the user needs one line
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"cannot reach the farm at {farm.label}: {reason}") from None
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


REACH_TIMEOUT_S = 5.0


def check_reachable(farm: FarmAddress, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Nothing when the head's port takes a connection within `timeout_s` (or the farm is a Ray
    started on this machine); else `UserError`: "cannot reach the farm at HOST:PORT: why"."""
    if farm.address is None:
        return
    host, _, port = farm.address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    raise UserError(f"cannot reach the farm at {farm.label}: {reason}")
