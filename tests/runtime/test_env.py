"""The runtime environment: what a front end builds once is what the core uses, folders and switches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ffdesk import hw
from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags, nvidia
from ffdesk.runtime.env import RuntimeEnv, read_settings
from ffdesk.runtime.residency import ResidencyManager
from tests.runtime.conftest import FakeLoader, FakeProbe
from tests.test_hw import FAKE_PID, FakeNvml

MB = 2**20


def test_from_system_uses_the_user_folders_the_settings_and_the_switches(tmp_path: Path) -> None:
    cache, data = Path(os.environ["XDG_CACHE_HOME"]), Path(os.environ["XDG_DATA_HOME"])
    env = RuntimeEnv.from_system({"FFDESK_NO_NVML": "1", "FFDESK_NO_NVENC": "0"})
    assert env.cache_dir == cache / "ffdesk" and env.data_dir == data / "ffdesk"
    assert env.settings_path == Path(os.environ["XDG_CONFIG_HOME"]) / "ffdesk" / "settings.json"
    assert env.models_dir == data / "ffdesk" / "models"  # nothing saved yet
    assert env.footprints_path == cache / "ffdesk" / "footprints.json"
    assert env.variants_dir == cache / "ffdesk" / "variants"
    assert env.trt_cache_dir == cache / "ffdesk" / "trt"
    assert env.driver == DriverFlags(no_nvml=True, no_nvenc=False)
    assert env.bench_cache == cache / "ffdesk" / "bench" and env.resources_dir is None
    moved = RuntimeEnv.from_system({"FFDESK_BENCH_CACHE": str(tmp_path), "FFDESK_RESOURCES": str(tmp_path)})
    assert moved.bench_cache == tmp_path / "bench" and moved.resources_dir == tmp_path
    assert moved.driver == DriverFlags()


def test_a_saved_models_folder_is_read_from_the_environments_settings(tmp_path: Path) -> None:
    from ffdesk.runtime.files import resolve_models_dir, save_models_dir

    env = RuntimeEnv.in_folder(tmp_path / "portable")
    saved = save_models_dir(tmp_path / "pack", env)
    assert read_settings(env.settings_path) == {"models_dir": str(saved)}
    assert resolve_models_dir(None, env) == env.models_dir  # the env is frozen: built before the save
    assert RuntimeEnv.from_system().models_dir != saved  # the user's own settings are untouched
    assert resolve_models_dir(tmp_path / "x", env) == (tmp_path / "x").resolve()
    assert env.with_models_dir(tmp_path / "y").models_dir == (tmp_path / "y").resolve()


def test_a_damaged_settings_file_is_said_in_one_line_not_read_silently(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a damaged settings.json sent every command to the default models folder without a word,
    # so a saved pack seemed to have vanished
    from ffdesk.cli import main

    settings = Path(os.environ["XDG_CONFIG_HOME"]) / "ffdesk" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('{"models_dir": "/somewhere/models"')  # cut off mid-write
    env = RuntimeEnv.from_system()
    assert env.models_dir == env.default_models_dir
    assert str(env.settings_note).startswith(f"{settings}: the settings file is not JSON (")
    assert main(["models", "list", "--json"]) == 0
    said = capsys.readouterr().err.splitlines()
    assert said == [f"ffdesk: warning: {env.settings_note}"]
    assert (
        "a models folder saved there is not used (`ffdesk models set-dir FOLDER` saves one again)" in said[0]
    )
    assert settings.read_text() == '{"models_dir": "/somewhere/models"'  # kept as it was
    settings.write_text('{"models_dir": "/somewhere/models"}')
    env = RuntimeEnv.from_system()
    assert env.models_dir == Path("/somewhere/models") and env.settings_note is None


def test_a_missing_models_folder_is_named_as_the_folder(tmp_path: Path) -> None:
    # a saved folder on a drive not mounted made each model "not found" as if one file were missing
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import find_model

    spec = load_catalog().get("inswapper_128")
    gone = tmp_path / "drive" / "models"
    with pytest.raises(
        UserError, match=rf"^model inswapper_128 not found: the models folder {gone} does not exist"
    ):
        find_model(spec, gone)
    gone.mkdir(parents=True)
    with pytest.raises(
        UserError, match=r"inswapper_128.onnx: model inswapper_128 not found \(put the file there"
    ):
        find_model(spec, gone)


def test_a_models_folder_that_cannot_be_read_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a folder without read permission made every model in it "cannot be read", naming a file
    # that need not be there
    import ffdesk.runtime.files as files

    def refused(path: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    env = RuntimeEnv.in_folder(tmp_path / "portable")
    (tmp_path / "pack").mkdir()
    monkeypatch.setattr(files.os, "scandir", refused)
    with pytest.raises(UserError, match=r"the models folder .*pack cannot be read \(Permission denied\)$"):
        files.resolve_models_dir(tmp_path / "pack", env)


def test_footprints_land_in_the_environments_cache(tmp_path: Path) -> None:
    env = RuntimeEnv.in_folder(tmp_path)
    probe = FakeProbe()
    with ResidencyManager(None, "cpu", probe=probe, env=env) as mgr:
        mgr.register("a", FakeLoader(probe, 3 * MB, "a"), fingerprint="crc32:0000abcd", warmup=False)
        with mgr.acquire("a"):
            pass
        assert mgr.footprints.path == env.footprints_path
    data = json.loads(env.footprints_path.read_text())
    assert data["crc32:0000abcd|fp32|CPUExecutionProvider"]["bytes"] == 3 * MB
    assert not RuntimeEnv.from_system().footprints_path.exists()  # not the user's cache


def test_variants_land_in_the_environments_cache_and_are_listed_from_there(
    standins_dir: Path, tmp_path: Path, catalog: Any
) -> None:
    from ffdesk.runtime.files import scan_folder
    from ffdesk.runtime.precision import make_fp16

    env = RuntimeEnv.in_folder(tmp_path)
    src = standins_dir / "arcface_w600k_r50.onnx"
    made = make_fp16(src, cache_dir=env.variants_dir)
    assert made.parent == env.variants_dir and made.is_file() and made.with_suffix(".hash").is_file()
    row = {r.file: r for r in scan_folder(catalog, standins_dir, variants_dir=env.variants_dir)}
    assert row["arcface_w600k_r50.onnx"].variants == ("fp16",)
    row = {r.file: r for r in scan_folder(catalog, standins_dir)}  # the user's cache has none
    assert row["arcface_w600k_r50.onnx"].variants == ()
    assert not [p for p in env.variants_dir.iterdir() if ".partial-" in p.name]


def test_the_cli_lists_variants_from_the_same_cache_as_before(
    standins_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line's environment is the platform's: a variant made with the defaults shows."""
    from ffdesk.cli import main
    from ffdesk.runtime.precision import make_fp16

    make_fp16(standins_dir / "arcface_w600k_r50.onnx", cache_dir=RuntimeEnv.from_system().variants_dir)
    assert (Path(os.environ["XDG_CACHE_HOME"]) / "ffdesk" / "variants").is_dir()
    assert main(["models", "list", "--json", "--models-dir", str(standins_dir)]) == 0
    files = {f["file"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert files["arcface_w600k_r50.onnx"]["variants"] == ["fp16"]


@pytest.mark.parametrize("flags", [DriverFlags(), DriverFlags(no_nvml=True), DriverFlags(no_nvenc=True)])
def test_given_flags_mean_the_same_everywhere_whatever_the_process_environment_says(
    monkeypatch: pytest.MonkeyPatch, flags: DriverFlags
) -> None:
    from ffdesk.runtime import memprobe, sessions

    # the process environment says the opposite of `flags`: only the flags count
    monkeypatch.setenv("FFDESK_NO_NVML", "" if flags.no_nvml else "1")
    monkeypatch.setenv("FFDESK_NO_NVENC", "" if flags.no_nvenc else "1")
    monkeypatch.setattr(nvidia, "load_pynvml", FakeNvml)
    monkeypatch.setattr(nvidia, "driver_present", lambda: True)
    gpus = 0 if flags.no_nvml else 1
    assert hw.nvml_disabled(flags) is flags.no_nvml
    assert hw.gpu_count(flags) == sessions.gpu_count(flags) == gpus
    assert (hw.process_gpu_memory(0, pid=FAKE_PID, flags=flags) is None) is flags.no_nvml
    assert (memprobe.gpu_used_bytes(0, flags) == 7 * MB) is not flags.no_nvml
    assert hw.nvenc_possible(flags) is not (flags.no_nvml or flags.no_nvenc)
    assert RuntimeEnv.from_system({"FFDESK_NO_NVML": "1" if flags.no_nvml else "0"}).driver.no_nvml is (
        flags.no_nvml
    )


def test_a_manager_given_an_environment_measures_the_gpu_with_its_switches(tmp_path: Path) -> None:
    env = RuntimeEnv.in_folder(tmp_path, DriverFlags(no_nvml=True))
    with ResidencyManager(None, "cuda", host_budget_bytes=0, env=env) as mgr:
        probe = mgr._pool.probe  # noqa: SLF001 - the probe the pool was given
        assert getattr(probe, "flags", None) == env.driver
