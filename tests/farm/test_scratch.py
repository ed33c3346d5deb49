"""A farm worker's scratch folder is removed when it ends, and by the next worker when it was
killed; a live worker's is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from ffdesk.farm.scratch import PREFIX, claim_scratch, sweep
from ffdesk.farm.worker import FarmWorker
from ffdesk.runtime.env import RuntimeEnv

_HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ffdesk.farm.scratch import claim_scratch
    s = claim_scratch(Path(sys.argv[1]))
    (s.path / "lead.mp4").write_bytes(b"x" * 1000)
    print(s.path, flush=True)
    time.sleep(600)
    """
)


def _holder(root: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_workers_folder_is_removed_by_the_next_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead, dead_path = _holder(tmp_path)
    live, live_path = _holder(tmp_path)
    try:
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(10)
        assert (dead_path / "lead.mp4").exists()  # a kill leaves it behind
        mine = claim_scratch(tmp_path)
        assert mine.swept == (dead_path,)
        assert not dead_path.exists() and not dead_path.with_suffix(".lock").exists()
        assert (live_path / "lead.mp4").exists()
        assert sweep(tmp_path) == ()  # this process's own is held too
        mine.close()
        assert not mine.path.exists()
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted([live_path.name, live_path.name + ".lock"])
    finally:
        live.kill()
        live.wait(10)
        dead.kill()


def test_a_process_that_ends_removes_its_own(tmp_path: Path) -> None:
    code = "import sys; from pathlib import Path; from ffdesk.farm.scratch import claim_scratch; "
    code += "s = claim_scratch(Path(sys.argv[1])); (s.path / 'f').write_bytes(b'1')"
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert not any(p.name.startswith(PREFIX) for p in tmp_path.iterdir())


def test_a_worker_has_a_scratch_folder_of_its_own_and_removes_it_on_close(tmp_path: Path) -> None:
    worker = FarmWorker("slot-0", None, use_gpu=False, env=RuntimeEnv.in_folder(tmp_path / "env"))
    folder = worker.scratch.path
    assert folder.is_dir() and folder.name.startswith(PREFIX)
    worker.close()
    assert not folder.exists()
