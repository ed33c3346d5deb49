"""A `--swapper` that names no swapper says what is wrong with it, with or without a source photo.

`render --swapper runs/ab` (a typo, an empty folder, a faceset) said the model "needs a source face
photo", and with `-s` "unknown model 'runs/ab'"; `live` said the first too, and a queued job whose
run folder had gone re-encoded its clip unswapped."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.live import live_job, live_stages
from ffdesk.pipeline.queue import RenderQueue
from ffdesk.pipeline.swapper_path import check_swapper_path
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.training import control
from ffdesk.training.synth import synth_faceset

PHOTO = resource_path("sample", "grace_hopper.jpg")


def _folders(root: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of folder that is no run, and the start of what is said about it."""
    empty = root / "empty"
    empty.mkdir()
    running = root / "running"
    running.mkdir()
    (running / control.STATUS).write_text('{"state": "running"}')
    faceset = synth_faceset(root / "faces", 0, 2, size=32)
    return {
        "missing": (root / "runs" / "ab", "no such folder"),
        "empty": (empty, "not a run folder (no model.onnx in it; `ffdesk train` makes one)"),
        "faceset": (faceset, "not a run folder but a faceset"),
        "running": (
            running,
            f"the training run has no model.onnx yet (a run exports it when it ends; "
            f"`ffdesk train export --run {running}` exports its last checkpoint now)",
        ),
        "missing model": (root / "gone.onnx", "no such file"),
        "not a model": (PHOTO, "not a model (give a name from `ffdesk models list`"),
    }


@pytest.mark.parametrize("kind", ["missing", "empty", "faceset", "running", "missing model", "not a model"])
@pytest.mark.parametrize("photo", [False, True])
def test_render_says_what_the_swapper_folder_is(
    kind: str, photo: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, says = _folders(tmp_path)[kind]
    argv = ["render", "-t", str(PHOTO), "-o", str(tmp_path / "x.jpg"), "--swapper", str(folder)]
    assert main([*argv, *(["-s", str(PHOTO)] if photo else [])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ffdesk: error: --swapper {folder}: {says}") and "\n" not in err, err
    assert "needs a source face photo" not in err and "unknown model" not in err
    assert not (tmp_path / "x.jpg").exists()


def test_a_relative_typo_and_a_bare_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path is read from the working folder, then the models folder (as the trained
    swapper's own lookup does); a bare name that is no model is the catalog's to name."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"^--swapper runs/ab: no such folder$"):
        check_swapper_path("runs/ab", tmp_path / "models")
    (tmp_path / "models" / "runs" / "ab").mkdir(parents=True)
    with pytest.raises(UserError, match=r"^--swapper runs/ab: not a run folder \(no model.onnx"):
        check_swapper_path("runs/ab", tmp_path / "models")
    with pytest.raises(UserError, match=r"inswaper_128.*did you mean inswapper_128"):
        check_swapper_path("inswaper_128", None)
    for fine in ("inswapper_128", None, ""):
        check_swapper_path(fine, None)  # a catalog name (its file is looked for where it is used)


@pytest.mark.parametrize("sources", [(), (PHOTO,)])
def test_live_says_what_the_swapper_folder_is(
    sources: tuple[Path, ...], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    job = live_job(list(sources), swapper=str(tmp_path / "runs" / "ab"))
    with pytest.raises(UserError, match=r"^--swapper .*/runs/ab: no such folder$"):
        live_stages(job, fps=15.0, env=run_env)
    (tmp_path / "runs" / "ab").mkdir(parents=True)
    with pytest.raises(UserError, match=r"^--swapper .*/runs/ab: not a run folder \(no model.onnx in it"):
        live_stages(job, fps=15.0, env=run_env)


def test_a_queued_job_whose_run_folder_is_gone_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue_file = tmp_path / "queue.json"
    gone = tmp_path / "runs" / "ab"
    output = tmp_path / "x.jpg"
    RenderQueue(queue_file).add(RenderJob(target=PHOTO, output=output, swapper=str(gone)))
    assert main(["queue", "run", "--queue", str(queue_file), "-q"]) == 2
    assert f"--swapper {gone}: no such folder" in capsys.readouterr().err
    assert not output.exists()  # not the photo re-encoded unswapped


@pytest.mark.parametrize("sources", [(), (PHOTO,)])
def test_a_render_job_as_the_app_runs_it_says_what_the_swapper_folder_is(
    sources: tuple[Path, ...], run_env: RuntimeEnv, tmp_path: Path
) -> None:
    """The app renders through `run_render` with no command line before it: the same one line."""
    from ffdesk.pipeline.engine import run_render

    job = RenderJob(
        target=PHOTO, output=tmp_path / "x.jpg", sources=sources, swapper=str(tmp_path / "runs" / "ab")
    )
    with pytest.raises(UserError, match=r"^--swapper .*/runs/ab: no such folder$"):
        run_render(job, env=run_env)
    assert not (tmp_path / "x.jpg").exists()


def test_a_folder_bearing_a_catalog_models_name_leaves_the_name_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--swapper inswapper_128` from a folder that holds a folder of that name (the app's working
    folder, a project folder): the catalog's model, as the swapper's own lookup takes it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inswapper_128").mkdir()
    check_swapper_path("inswapper_128", None)
    (tmp_path / "inswapper_12").mkdir()  # a name the catalog does not know: the folder's problem
    with pytest.raises(UserError, match=r"^--swapper inswapper_12: not a run folder"):
        check_swapper_path("inswapper_12", None)
