"""The runtime environment: the folders and switches a run uses, decided once by a front end.

The command line and the desktop app build a `RuntimeEnv` at start (`RuntimeEnv.from_system()`:
the platform's user folders, the settings file, `FFDESK_*` variables) and hand it to what needs
it: the residency manager's footprint store, precision variants, TensorRT caches, the models
folder, the GPU driver switches. This module is the one place in the core that reads environment
variables, the settings file or the platform's folders; everything else is given the values.

A core function that needs the environment requires it; only front ends (the command line, the
desktop app, a farm worker on its own machine) call `RuntimeEnv.from_system()`, and tests build
one in a folder of their own (`RuntimeEnv.in_folder`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags
from ffdesk.media import atomic
from ffdesk.userpath import expand_user

APP = "ffdesk"

log = logging.getLogger(__name__)


def read_settings(path: Path) -> dict[str, Any]:
    """The settings file's keys ({} when it is missing or unreadable)."""
    return _load_settings(Path(path))[0]


def _load_settings(path: Path) -> tuple[dict[str, Any], str | None]:
    """The settings file's keys, and why it cannot be read when it is there but damaged (not
    UTF-8, not JSON, not an object, nested too deep) or unreadable; ({}, None) when missing."""
    try:
        return jsontext.read_object(path, "settings file")
    except OSError as exc:
        return {}, f"cannot be read ({exc.strerror or exc})"


def write_setting(path: Path, key: str, value: Any) -> str | None:
    """Set one key in the settings file at `path` (atomically; other keys are kept).

    A file that is there but cannot be read is first kept aside as NAME.corrupt (never written
    over), then a fresh one holds the key: the one-line note saying so is logged (stderr on the
    command line) and returned; None when the file was sound or missing. `UserError` when a
    damaged file cannot be kept aside (nothing is written then)."""
    path = Path(path)
    data, problem = _load_settings(path)
    note = None
    if problem is not None:
        try:
            aside = atomic.keep_aside(path)
        except OSError as exc:
            raise UserError(
                f"{path}: the settings file {problem} and cannot be kept aside ({exc.strerror or exc}); "
                "move it away and try again"
            ) from None
        note = f"{path.name} {problem}: kept it as {aside.name} and started a fresh one"
        log.warning("%s", note)
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True), durable=False)
    return note


@dataclass(frozen=True)
class RuntimeEnv:
    """Where a run keeps its files and which switches it honours.

    cache_dir: measured footprints, precision variants, TensorRT engines, crash logs;
    data_dir: the default models folder and the bench history;
    settings_path: settings.json (the saved models folder);
    models_dir: the models folder (the saved setting, else `<data_dir>/models`);
    driver: the GPU driver switches (no NVML, no NVENC);
    bench_cache_dir / bench_history: where benches keep inputs and their figures;
    resources_dir: the bundled resources folder when moved (`FFDESK_RESOURCES`), else None (the
    installed one, see `ffdesk.runtime.resources`);
    max_pixels: the most pixels an image or video frame may have before it is decoded
    (`FFDESK_MAX_PIXELS`), else None (the default, `ffdesk.media.probe.DEFAULT_MAX_PIXELS`); a
    front end hands it on (`RenderJob.max_pixels`) where the user gave no `--max-pixels`."""

    cache_dir: Path
    data_dir: Path
    settings_path: Path
    models_dir: Path
    driver: DriverFlags = field(default_factory=DriverFlags)
    bench_cache_dir: Path | None = None
    bench_history: Path | None = None
    resources_dir: Path | None = None
    max_pixels: int | None = None
    settings_note: str | None = None
    """Why the settings file could not be read, for a front end to say once."""

    @classmethod
    def from_system(cls, environ: Mapping[str, str] | None = None) -> RuntimeEnv:
        """The platform's user folders (`platformdirs`), the saved settings and the `FFDESK_*`
        variables of `environ` (default: this process's environment). `UserError` for a
        `FFDESK_MAX_PIXELS` that is not a number of pixels."""
        from platformdirs import user_cache_dir, user_config_dir, user_data_dir

        env = os.environ if environ is None else environ
        cache = Path(user_cache_dir(APP))
        data = Path(user_data_dir(APP))
        settings = Path(user_config_dir(APP)) / "settings.json"
        bench_root = env.get("FFDESK_BENCH_CACHE")
        history = env.get("FFDESK_BENCH_HISTORY")
        max_pixels = env.get("FFDESK_MAX_PIXELS", "").strip()
        saved, note = _saved_models_dir(settings)
        return cls(
            cache_dir=cache,
            data_dir=data,
            settings_path=settings,
            models_dir=saved or data / "models",
            settings_note=note,
            driver=DriverFlags.from_environ(env),
            bench_cache_dir=(Path(bench_root) if bench_root else cache) / "bench",
            bench_history=Path(history) if history else data / "bench-history.jsonl",
            resources_dir=moved_resources_dir(env),
            max_pixels=parse_max_pixels(max_pixels, "FFDESK_MAX_PIXELS") if max_pixels else None,
        )

    @classmethod
    def in_folder(cls, root: Path, driver: DriverFlags | None = None) -> RuntimeEnv:
        """Everything under one folder (tests, portable runs): cache/, data/, settings.json."""
        root = Path(root)
        return cls(
            cache_dir=root / "cache",
            data_dir=root / "data",
            settings_path=root / "settings.json",
            models_dir=root / "data" / "models",
            driver=driver or DriverFlags(),
        )

    def with_models_dir(self, folder: Path | str) -> RuntimeEnv:
        """The same environment with another models folder (`--models-dir`)."""
        return replace(self, models_dir=expand_user(folder).resolve())

    @property
    def default_models_dir(self) -> Path:
        """`<data_dir>/models`: the models folder when none was saved."""
        return self.data_dir / "models"

    @property
    def variants_dir(self) -> Path:
        """Cached FP16/INT8 variants of models."""
        return self.cache_dir / "variants"

    @property
    def weights_dir(self) -> Path:
        """External-data copies of large models (`ffdesk.runtime.weights`)."""
        return self.cache_dir / "weights"

    @property
    def footprints_path(self) -> Path:
        """Measured model footprints (footprints.json)."""
        return self.cache_dir / "footprints.json"

    @property
    def precision_choices_path(self) -> Path:
        """What `--precision auto` measured and chose per model and device."""
        return self.cache_dir / "precision-choices.json"

    @property
    def trt_cache_dir(self) -> Path:
        """TensorRT engine and timing caches."""
        return self.cache_dir / "trt"

    @property
    def logs_dir(self) -> Path:
        """Crash logs of the command line."""
        return self.cache_dir / "logs"

    @property
    def bench_cache(self) -> Path:
        """Synthesized bench inputs (`$FFDESK_BENCH_CACHE/bench`, else `<cache_dir>/bench`)."""
        return self.bench_cache_dir or self.cache_dir / "bench"

    @property
    def bench_history_path(self) -> Path:
        """The bench history file (`$FFDESK_BENCH_HISTORY`, else in the data folder)."""
        return self.bench_history or self.data_dir / "bench-history.jsonl"


def saved_models_dir(settings_path: Path) -> Path | None:
    """The models folder saved in the settings file, or None (also where the file cannot be
    read)."""
    return _saved_models_dir(settings_path)[0]


def _saved_models_dir(settings_path: Path) -> tuple[Path | None, str | None]:
    """The models folder saved in the settings file (None: none), read once, and one line for a
    file that is there but cannot be read: the folder it may hold is not used, so the models are
    looked for in the default folder (None when it is sound or missing)."""
    settings, problem = _load_settings(Path(settings_path))
    saved = settings.get("models_dir")
    folder = expand_user(saved) if isinstance(saved, str) and saved else None
    if problem is None:
        return folder, None
    return folder, (
        f"{settings_path}: the settings file {problem}: a models folder saved there is not used "
        "(`ffdesk models set-dir FOLDER` saves one again)"
    )


def moved_resources_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """`$FFDESK_RESOURCES`: a resources folder to use instead of the installed one, or None."""
    value = (os.environ if environ is None else environ).get("FFDESK_RESOURCES")
    return Path(value) if value else None


_PIXELS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(mp?)?\s*$", re.IGNORECASE)


MAX_PIXEL_LIMIT = 2**31 - 1
"""The largest pixel limit there is: FFmpeg's `max_pixels` is a 32-bit int (more made every clip
"cannot decode video (Numerical result out of range)")."""


def parse_max_pixels(text: str, what: str = "--max-pixels") -> int:
    """A pixel limit as users write it: pixels ("250000000", "250_000_000") or megapixels with
    "M" or "MP" ("250M", "0.5MP"). `UserError` naming `what` (the option or variable it came
    from) for anything else, for less than one pixel, or for more than `MAX_PIXEL_LIMIT`."""
    m = _PIXELS.match(str(text).replace("_", ""))
    pixels = 0
    if m is not None:
        number, mega = m.groups()
        if mega:
            pixels = round(float(number) * 1_000_000)
        elif "." not in number:
            pixels = int(number)
    if pixels < 1:
        raise UserError(f"{what}: {text!r} is not a number of pixels, 1 or more (e.g. 250000000, 250M)")
    if pixels > MAX_PIXEL_LIMIT:
        raise UserError(f"{what}: {text!r} is more than FFmpeg's limit of {MAX_PIXEL_LIMIT} pixels")
    return pixels
