"""The core reads no environment variables and no platform folders of its own: front ends build a
`RuntimeEnv` (ffdesk.runtime.env, the one builder) and pass it in. Nor does the core build one from
the system itself (`RuntimeEnv.from_system()`): a core function that needs the environment is given
it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("runtime", "media", "faces", "swap", "pipeline", "training", "hw", "telemetry")

BUILDERS = {
    "ffdesk/runtime/env.py": "builds RuntimeEnv from the process environment and platformdirs",
    "ffdesk/hw/nvidia.py": "DriverFlags.from_environ, the switches' builder (and where Windows is)",
}
KNOWN = {
    # torchrun's process protocol (RANK, WORLD_SIZE, MASTER_ADDR, allocator settings), not settings
    "ffdesk/training/launch.py": "torchrun's variables",
    "ffdesk/training/dist.py": "torchrun's variables",
    "ffdesk/training/trainer.py": "PYTORCH_CUDA_ALLOC_CONF for the torch allocator",
}
SYSTEM_BUILDER = "ffdesk/runtime/env.py"
"""Where `RuntimeEnv.from_system` is defined (the only core module that may name it)."""


def ambient_reads(source: str) -> list[str]:
    """`os.environ`, `os.getenv`, `os.putenv` and `platformdirs` uses in a module's source."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("environ", "getenv", "putenv", "environb"):
                found.append(f"line {node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "os" and {a.name for a in node.names} & {"environ", "getenv", "environb"}:
                found.append(f"line {node.lineno}: from os import ...")
            elif node.module.split(".")[0] == "platformdirs":
                found.append(f"line {node.lineno}: from platformdirs import ...")
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "platformdirs" for a in node.names):
            found.append(f"line {node.lineno}: import platformdirs")
    return found


def system_builds(source: str) -> list[str]:
    """Uses of `from_system` (`RuntimeEnv.from_system()`, an alias of it, a bare name) in a source."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "from_system":
            found.append(f"line {node.lineno}: .from_system")
        elif isinstance(node, ast.Name) and node.id == "from_system":
            found.append(f"line {node.lineno}: from_system")
    return found


def _core_sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        for layer in CORE
        for path in sorted((ROOT / "ffdesk" / layer).rglob("*.py"))
    ]


def test_core_modules_leave_the_environment_to_the_front_ends() -> None:
    offenders: dict[str, list[str]] = {}
    for layer in CORE:
        for path in sorted((ROOT / "ffdesk" / layer).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in BUILDERS or rel in KNOWN:
                continue
            reads = ambient_reads(path.read_text(encoding="utf-8"))
            if reads:
                offenders[rel] = reads
    assert offenders == {}, "read it from the RuntimeEnv a front end passes in: " + repr(offenders)


def test_the_check_catches_each_way_of_reading_the_environment() -> None:
    assert ambient_reads("import os\nx = os.environ.get('A')\n") == ["line 2: os.environ"]
    assert ambient_reads("import os\nos.getenv('A')\n") == ["line 2: os.getenv"]
    assert ambient_reads("from os import environ\n") == ["line 1: from os import ..."]
    assert ambient_reads("def f():\n    from platformdirs import user_cache_dir\n") == [
        "line 2: from platformdirs import ..."
    ]
    assert ambient_reads("import platformdirs\n") == ["line 1: import platformdirs"]
    assert ambient_reads("import os\nos.getpid()\nos.path.join('a')\n") == []


def test_core_modules_are_given_the_runtime_environment() -> None:
    offenders = {
        rel: found
        for rel, source in _core_sources()
        if rel != SYSTEM_BUILDER and (found := system_builds(source))
    }
    assert offenders == {}, "take the RuntimeEnv a front end passes in: " + repr(offenders)


def test_the_queue_file_lives_in_the_environment(tmp_path: Path) -> None:
    from ffdesk.pipeline.queue import default_queue_path
    from ffdesk.runtime.env import RuntimeEnv

    env = RuntimeEnv.in_folder(tmp_path)
    assert default_queue_path(env) == tmp_path / "data" / "queue.json"


def test_the_build_check_catches_each_way_of_calling_it() -> None:
    assert system_builds("RuntimeEnv.from_system()\n") == ["line 1: .from_system"]
    assert system_builds("env.RuntimeEnv.from_system(environ={})\n") == ["line 1: .from_system"]
    assert system_builds("build = RuntimeEnv.from_system\n") == ["line 1: .from_system"]
    assert system_builds("from_system()\n") == ["line 1: from_system"]
    assert system_builds("RuntimeEnv.in_folder(root)\nenv.from_json()\n") == []
