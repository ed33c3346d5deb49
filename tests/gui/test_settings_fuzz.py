"""A seeded fuzzer over the settings and queue files ffdesk reads back.

Three files, each first written by ffdesk itself and then damaged as its seed says (random bytes,
the text cut or given random bytes, bits flipped, a value of another type or a hostile path, an
entry swapped, dropped or duplicated, unknown keys, nesting deeper than any file ffdesk writes;
for gui.ini also lines dropped, duplicated, swapped or added, and the saved controls' JSON
damaged inside a file Qt wrote):

- the desktop app's `gui.ini`: the window opens, says so in at most one line when the file was
  damaged, keeps it aside as `gui.ini.corrupt` (the damaged bytes as they were) and never saves it
  back as it was; a second window finds nothing more to set aside;
- the runtime's `settings.json`: reading it changes nothing; a window opens on the environment
  built from it (`RuntimeEnv.from_system()`, as `ffdesk gui` does) and `ffdesk models list
  --no-verify --models-dir X` ends 0 or 2 in one line; writing a setting keeps a damaged file
  aside once and keeps every key of a sound one;
- the render queue's `queue.json`: the window and `ffdesk queue list --queue FILE` (in the order
  the seed says) both open it, every job left as it was written is still there; the listing only
  reads (at most one line, the file left as it was), the window keeps a damaged file aside once
  and rewrites it with the jobs that could be read (or moves it aside when none could), and
  whatever opens it next finds it sound.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ffdesk import jsontext
from ffdesk.cli import main
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue
from ffdesk.runtime.env import RuntimeEnv, read_settings, write_setting
from tests.gui.windows import OPENED, window_on
from tests.pipeline.test_manifest_fuzz import (
    damage_text,
    deep_depth,
    nested,
    odd_name,
    odd_value,
    unknown_key,
    with_nested,
)

CASES = 30
QUICK = 10
"""Cases of each fuzz test in the default run; the rest run with `-m slow`."""


def _seeds(extra: tuple[Any, ...] = ()) -> list[Any]:
    """The fuzz seeds, those past `QUICK` marked slow, then `extra` (always run)."""
    cases = [s if s < QUICK else pytest.param(s, marks=pytest.mark.slow) for s in range(CASES)]
    return [*cases, *extra]


BYTE_KINDS = ("text-cut", "bytes-inserted", "bytes-flipped", "random-bytes")
JSON_KINDS = (
    "value-retyped",
    "number-changed",
    "string-renamed",
    "entries-swapped",
    "entry-dropped",
    "entry-duplicated",
    "key-dropped",
    "unknown-key",
    "nested-deep",
    *BYTE_KINDS,
)
INI_KINDS = (
    "line-dropped",
    "line-duplicated",
    "lines-swapped",
    "line-added",
    "controls-damaged",
    "value-retyped",
    "nested-deep",
    *BYTE_KINDS,
)
"""Each case takes the kind its seed picks in turn, the details from its own generator."""
INI_KEYS = (
    "session/settings",
    "session/split",
    "session/show_before",
    "recent",
    "window/geometry",
    "window/state",
    "queue/target",
    "queue/farm",
)


SEEN: list[str] = []
"""How each case ended, printed after the module's tests (`-s` shows it)."""


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    print("\n" + "\n".join(SEEN))


@pytest.fixture(autouse=True)
def _windows_freed() -> Iterator[None]:
    """The windows a case opened are freed after it (after `open_window` has shut them down).

    A window that was shut down is kept, with the 77 menus and frames it made, and
    `ffdesk.gui.app.application()` (which `open_window` calls) styles every widget there is
    again: each case's setup took 10 ms longer than the one before (0.8 s by the 90th). The
    case's windows are those `window_on` made meanwhile (`tests.gui.windows.OPENED`): walking
    Qt's top-level widgets instead wrapped widgets other test files left, and crashed now and then."""
    import shiboken6

    first = len(OPENED)
    yield
    for ref in OPENED[first:]:
        widget = ref()
        if widget is not None and shiboken6.isValid(widget):
            shiboken6.delete(widget)
    del OPENED[first:]


# ---- JSON damage ---------------------------------------------------------------------------------

Slot = tuple[Any, Any]
"""A place in a JSON tree: (the list or object holding it, its index or key)."""


def _slots(data: Any) -> list[Slot]:
    """Every place below the root, in a fixed order (without recursion)."""
    out: list[Slot] = []
    stack = [data]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            out.append((node, key))
            stack.append(node[key])
    return out


def mutate_json(raw: bytes, rng: random.Random, kind: str, absolute: Path) -> tuple[bytes, str]:
    """JSON text ffdesk wrote, with one mutation of `kind` (see `JSON_KINDS`), and what it did;
    drawn again while it leaves the contents as they were (a key swapped with itself)."""
    for _ in range(50):
        out, how = _mutate_json_once(raw, rng, kind, absolute)
        if _contents(out) != _contents(raw):
            return out, how
    raise AssertionError(f"{kind} left {raw[:80]!r} as it was")


def _contents(raw: bytes) -> str | bytes:
    """What JSON text says, types included (12.0 is not 12), or the bytes where it says nothing."""
    try:
        return json.dumps(json.loads(raw), sort_keys=True)
    except (ValueError, RecursionError):
        return raw


def _mutate_json_once(raw: bytes, rng: random.Random, kind: str, absolute: Path) -> tuple[bytes, str]:
    if kind in BYTE_KINDS:
        out = damage_text(rng, raw, kind)
        return out, f"{kind}: {len(raw)} -> {len(out)} bytes"
    data = json.loads(raw)
    slots = _slots(data)
    leaves = [(n, k) for n, k in slots if not isinstance(n[k], dict | list)]
    lists = [n[k] for n, k in slots if isinstance(n[k], list) and n[k]] + (
        [data] if isinstance(data, list) else []
    )
    objects = [data] + [n[k] for n, k in slots if isinstance(n[k], dict) and n[k]]
    how = kind
    if kind == "number-changed":
        numbers = [(n, k) for n, k in leaves if type(n[k]) in (int, float)]
        node, key = rng.choice(numbers or leaves)
        delta = rng.choice([1, -1, 100, -(10**6), 2**40])
        node[key] = node[key] + delta if type(node[key]) in (int, float) else delta
        how = f"{key} {delta:+d}"
    elif kind == "value-retyped":
        node, key = rng.choice(leaves)
        node[key] = odd_value(rng, node[key])
        how = f"{key} = {node[key]!r}"
    elif kind == "string-renamed":
        strings = [(n, k) for n, k in leaves if isinstance(n[k], str)]
        node, key = rng.choice(strings or leaves)
        node[key] = odd_name(rng, absolute)
        how = f"{key} = {str(node[key])[:60]!r}"
    elif kind in ("entries-swapped", "entry-dropped", "entry-duplicated") and lists:
        items = rng.choices(lists, weights=[len(x) for x in lists])[0]  # the jobs as often as the rest
        i, j = rng.randrange(len(items)), rng.randrange(len(items))
        if kind == "entries-swapped":
            items[i], items[j] = items[j], items[i]
        elif kind == "entry-dropped":
            del items[i]
        else:
            items.insert(j, json.loads(json.dumps(items[i])))
        how = f"items {i}, {j} of a list of {len(items)}"
    elif kind == "entry-duplicated" and isinstance(data, dict) and data:
        key = rng.choice(list(data))  # given again at the end, another value: the parser keeps the last
        text = json.dumps(data)
        again = f"{text[:-1]}, {json.dumps(key)}: {json.dumps(odd_name(rng, absolute))}}}"
        return again.encode(), f"{kind}: {key!r} given twice"
    elif kind in ("entries-swapped", "entry-dropped", "key-dropped"):
        node = rng.choice(objects)
        keys = list(node)
        a = rng.choice(keys)
        if kind != "entries-swapped":
            del node[a]
            how = f"key {a!r} dropped"
        elif len(keys) > 1:
            b = rng.choice([k for k in keys if k != a])
            node[a], node[b] = node[b], node[a]
            how = f"keys {a!r}, {b!r} swapped"
        else:  # the only key: key and value swapped
            value = node.pop(a)
            node[value if isinstance(value, str) else json.dumps(value)] = a
            how = f"key {a!r} and its value swapped"
    elif kind == "unknown-key":
        node = rng.choice(objects)
        key = unknown_key(rng)
        node[key] = odd_value(rng, 0)
        how = f"{key[:20]!r} = {node[key]!r}"
    elif kind == "nested-deep":
        depth = deep_depth(rng)
        if rng.random() < 0.3:
            return nested(depth, raw.decode()).encode(), f"{kind}: the whole file {depth} deep"
        index = rng.randrange(len(slots))

        def at(d: Any, put: Callable[[Any], str]) -> None:
            node, key = _slots(d)[index]
            node[key] = put(node[key])

        return with_nested(data, at, depth).encode(), f"{kind}: place {index} {depth} deep"
    else:
        raise ValueError(kind)
    return json.dumps(data, indent=rng.choice([None, 1])).encode(), f"{kind}: {how}"


# ---- gui.ini ------------------------------------------------------------------------------------


def _ini_warnings(window: Any) -> list[str]:
    return [e.text for e in window.status.entries if e.level == "warning" and e.text.startswith("gui.ini")]


def _queue_warnings(window: Any) -> list[str]:
    return [e.text for e in window.status.entries if e.level == "warning" and e.text.startswith("queue.json")]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, tiny_clip: Path) -> Iterator[dict[str, bytes]]:
    """The three files as ffdesk writes them: gui.ini (a window that opened a clip, changed its
    controls and closed), settings.json (`write_setting`, as `models set-dir` does) and queue.json
    (jobs added, one running, one done, one failed)."""
    from ffdesk.gui.app import application

    application()
    folder = tmp_path_factory.mktemp("written")
    w = window_on(RuntimeEnv.in_folder(tmp_path_factory.mktemp("env")), folder)
    assert w.open_clip(tiny_clip)
    w.session.update_settings(quality=90, batch=8, mode="final", encoder="prores")
    w.session.set_split(0.3)
    w.shutdown()
    write_setting(folder / "settings.json", "models_dir", "/srv/ffdesk/models")
    queue = RenderQueue(folder / "queue.json")
    ids = [
        queue.add(
            RenderJob(
                target=Path(f"/clips/shoot/clip{i}.mp4"),
                output=Path(f"/renders/out{i}.mp4"),
                sources=(Path(f"/faces/face{i}.jpg"),),
                mode="preview" if i % 2 else "final",
                quality=50 + i,
                start=1.5 if i == 2 else None,
                masks=("box",) if i == 3 else (),
            )
        ).id
        for i in range(4)
    ]
    queue.update(ids[0], state="done", frames_done=250, frames_total=250, message="/renders/out0.mp4")
    queue.update(ids[1], state="running", frames_done=12, frames_total=250, fps=3.5, eta_s=68.0)
    queue.update(ids[2], state="failed", message="/clips/shoot/clip2.mp4: no such file")
    yield {name: (folder / name).read_bytes() for name in ("gui.ini", "settings.json", "queue.json")}


def mutate_ini(raw: bytes, rng: random.Random, kind: str, path: Path, absolute: Path) -> tuple[bytes, str]:
    """gui.ini as Qt wrote it, with one mutation of `kind` (see `INI_KINDS`), and what it did. The
    value-level kinds write through QSettings, so the file is well-formed and only its values damaged."""
    if kind in BYTE_KINDS:
        out = damage_text(rng, raw, kind)
        return out, f"{kind}: {len(raw)} -> {len(out)} bytes"
    lines = raw.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if kind in ("line-dropped", "line-duplicated", "lines-swapped", "line-added"):
        if kind == "line-dropped":
            del lines[i]
        elif kind == "line-duplicated":
            lines.insert(j, lines[i])
        elif kind == "lines-swapped":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(
                j, rng.choice([b"[weird]", b"unknown=1", b"=", b"[", b"novalue", b'a/b/c="x', b";x"])
            )
        return b"\n".join(lines), f"{kind}: lines {i}, {j}"
    from PySide6.QtCore import QByteArray, QSettings

    path.write_bytes(raw)
    q = QSettings(str(path), QSettings.Format.IniFormat)
    if kind == "controls-damaged":
        text = str(q.value("session/settings"))
        damaged, how = mutate_json(text.encode(), rng, rng.choice(JSON_KINDS), absolute)
        q.setValue("session/settings", damaged.decode("utf-8", "replace"))
    elif kind == "value-retyped":
        key = rng.choice(INI_KEYS)
        value = rng.choice(
            [
                odd_value(rng, 0),
                odd_name(rng, absolute),
                QByteArray(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))),
                [odd_name(rng, absolute), 5],
                "x" * 10_000,
            ]
        )
        q.setValue(key, _ini_value(value))
        how = f"{key} = {str(value)[:60]!r}"
    elif kind == "nested-deep":
        depth = deep_depth(rng)
        q.setValue("session/settings", nested(depth, str(q.value("session/settings"))))
        how = f"session/settings {depth} deep"
    else:
        raise ValueError(kind)
    q.sync()
    assert q.status() == QSettings.Status.NoError
    return path.read_bytes(), f"{kind}: {how}"


def _ini_value(value: Any) -> Any:
    """`value` as an INI file holds it: text (a list: of text), bytes as they are; no NUL (QSettings
    stops a value there)."""
    from PySide6.QtCore import QByteArray

    if isinstance(value, QByteArray):
        return value
    if isinstance(value, list):
        return [_ini_value(v) for v in value]
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict) else str(value)
    return text.replace("\0", "")


def _corrupt(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f"{name}*.corrupt"))


@pytest.mark.parametrize("seed", _seeds())
def test_a_damaged_gui_ini_opens_the_window_and_is_kept_aside_once(
    seed: int, written: dict[str, bytes], open_window: Callable[[], Any], tmp_path: Path
) -> None:
    rng = random.Random(seed)
    kind = INI_KINDS[seed % len(INI_KINDS)]
    ini = tmp_path / "gui.ini"
    damaged, mutation = mutate_ini(written["gui.ini"], rng, kind, ini, tmp_path / "abs")
    ini.write_bytes(damaged)
    w = open_window()
    said = _ini_warnings(w)
    assert len(said) <= 1, (mutation, said)
    if said:
        assert "kept the file as gui.ini.corrupt" in said[0], (mutation, said)
        assert _corrupt(tmp_path, "gui.ini") == [tmp_path / "gui.ini.corrupt"], mutation
        assert (tmp_path / "gui.ini.corrupt").read_bytes() == damaged, mutation  # as it was
    else:
        assert _corrupt(tmp_path, "gui.ini") == [], mutation
    w.session.update_settings(quality=77)
    w.shutdown()
    if said:
        assert ini.read_bytes() != damaged, mutation  # never saved back as it was
    again = open_window()
    assert _ini_warnings(again) == [], (mutation, said)  # nothing more to set aside
    assert again.session.settings.quality == 77, mutation
    assert _corrupt(tmp_path, "gui.ini") == ([tmp_path / "gui.ini.corrupt"] if said else []), mutation
    SEEN.append(f"gui.ini seed {seed}: {mutation[:80]} -> {'kept aside' if said else 'read'}")


# ---- settings.json --------------------------------------------------------------------------------


def _ended_in_one_line(code: int, err: str, what: str) -> None:
    assert code in (0, 2), (what, code, err[-1500:])
    assert "Traceback" not in err and "internal error" not in err, (what, err[-1500:])
    lines = err.strip().splitlines()
    assert len(lines) <= 1, (what, lines)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("ffdesk: error: "), (what, lines)


def _readable_object(raw: bytes) -> dict[str, Any] | None:
    """What a settings reader should make of `raw`: its object, or None for a damaged file."""
    try:
        data = jsontext.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


HOME_OF_NOBODY = pytest.param(353, id="353-models-dir-of-an-unknown-user")
"""A case from a wider run of the same fuzzer (seeds 30 to 2029; 15 of them, all this one fault): a saved
models_dir of '~nosuchuser-ffdesk/x', whose `Path.expanduser()` raised RuntimeError in every command."""


@pytest.mark.parametrize("seed", _seeds((HOME_OF_NOBODY,)))
def test_a_damaged_settings_json_is_read_without_change_and_kept_aside_once(
    seed: int, written: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(seed)
    kind = JSON_KINDS[seed % len(JSON_KINDS)]
    damaged, mutation = mutate_json(written["settings.json"], rng, kind, tmp_path / "abs")
    path = RuntimeEnv.from_system().settings_path  # the command line's, in a folder of the test's
    path.parent.mkdir(parents=True)
    path.write_bytes(damaged)
    expected = _readable_object(damaged)
    assert read_settings(path) == (expected or {}), mutation
    from ffdesk.gui.app import application

    application()
    w = window_on(RuntimeEnv.from_system(), tmp_path)  # as `ffdesk gui` opens it: the saved models folder
    w.shutdown()
    (tmp_path / "models").mkdir(exist_ok=True)  # (a --models-dir that is not there is refused)
    code = main(["models", "list", "--no-verify", "--models-dir", str(tmp_path / "models")])
    _ended_in_one_line(code, capsys.readouterr().err, mutation)
    assert path.read_bytes() == damaged, mutation  # reading alone changes nothing
    assert _corrupt(path.parent, "settings.json") == [], mutation
    note = write_setting(path, "models_dir", "/new/models")
    assert json.loads(path.read_text()) == {**(expected or {}), "models_dir": "/new/models"}, mutation
    if expected is None:
        assert note is not None and "\n" not in note, mutation
        assert note.endswith("kept it as settings.json.corrupt and started a fresh one"), (mutation, note)
        assert (path.parent / "settings.json.corrupt").read_bytes() == damaged, mutation
    else:
        assert note is None, (mutation, note)
    assert write_setting(path, "other", 1) is None, mutation
    kept = [] if expected is not None else [path.parent / "settings.json.corrupt"]
    assert _corrupt(path.parent, "settings.json") == kept, mutation
    code = main(["models", "list", "--no-verify", "--models-dir", str(tmp_path / "models")])
    _ended_in_one_line(code, capsys.readouterr().err, mutation)
    outcome = "read" if expected is not None else "kept aside"
    SEEN.append(f"settings.json seed {seed}: {mutation[:80]} -> {outcome}")


# ---- queue.json ---------------------------------------------------------------------------------


def _untouched_ids(raw: bytes, original: bytes) -> set[str]:
    """The ids of jobs the mutation left exactly as ffdesk wrote them (types included)."""
    try:
        data = jsontext.loads(raw.decode("utf-8"))
    except ValueError:
        return set()
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        return set()
    written = {json.dumps(j, sort_keys=True): j["id"] for j in json.loads(original)["jobs"]}
    return {written[key] for key in (json.dumps(j, sort_keys=True) for j in jobs) if key in written}


def _stored_jobs(raw: bytes) -> int | None:
    """How many entries the file lists, when it is a readable queue at all."""
    try:
        data = jsontext.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("jobs", []), list):
        return None
    return len(data.get("jobs", []))


@pytest.mark.parametrize("seed", _seeds())
def test_a_damaged_queue_keeps_every_readable_job_and_is_kept_aside_once(
    seed: int,
    written: dict[str, bytes],
    open_window: Callable[[], Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(seed)
    kind = JSON_KINDS[seed % len(JSON_KINDS)]
    damaged, mutation = mutate_json(written["queue.json"], rng, kind, tmp_path / "abs")
    path = tmp_path / "queue.json"
    path.write_bytes(damaged)
    untouched = _untouched_ids(damaged, written["queue.json"])
    order = rng.choice(["window first", "command line first"])
    seen: dict[str, tuple[list[str], list[str], int]] = {}  # (ids, warnings, exit) by opener

    def window() -> None:
        w = open_window()
        seen["window"] = ([e.id for e in w.queue.entries()], _queue_warnings(w), 0)

    def command_line() -> None:
        before = path.read_bytes() if path.exists() else None
        code = main(["queue", "list", "--json", "--queue", str(path)])
        out, err = capsys.readouterr()
        _ended_in_one_line(code, err, mutation)
        assert (path.read_bytes() if path.exists() else None) == before, mutation  # it only reads
        ids = [job["id"] for job in json.loads(out)["jobs"]] if code == 0 else []
        seen["command line"] = (ids, [line for line in err.splitlines() if "queue.json" in line], code)

    for opener in (window, command_line) if order == "window first" else (command_line, window):
        opener()
    ids, said, _ = seen["window"]
    listed, listing_said, listing_code = seen["command line"]
    assert untouched <= set(ids) and len(set(ids)) == len(ids), (mutation, untouched, ids)
    assert len(said) <= 1 and len(listing_said) <= 1, (mutation, seen)
    if order == "window first":
        assert listing_said == [] and listed == ids, (mutation, seen)  # sound once set aside
    elif listing_code == 0:
        assert listed == ids, (mutation, seen)  # the damaged file read as the window reads it
    corrupt = _corrupt(tmp_path, "queue.json")
    if said:
        assert corrupt == [tmp_path / "queue.json.corrupt"], (mutation, said)
        assert corrupt[0].read_bytes() == damaged, mutation  # the damaged bytes, as they were
        if ids:
            assert path.read_bytes() != damaged and RenderQueue(path).warning is None, mutation
        else:
            assert not path.exists() or path.read_bytes() != damaged, mutation
    else:
        assert corrupt == [], (mutation, said)
        assert len(ids) == _stored_jobs(damaged), (mutation, ids)  # nothing dropped without a word
    again = RenderQueue(path)
    assert again.warning is None and [e.id for e in again.entries()] == ids, mutation
    assert _corrupt(tmp_path, "queue.json") == corrupt, mutation
    outcome = f"{'kept aside' if said else 'read'}, {len(ids)} jobs"
    SEEN.append(f"queue.json seed {seed}: {mutation[:70]} ({order}) -> {outcome}")


def test_the_mutations_are_seeded_and_change_the_files(written: dict[str, bytes], tmp_path: Path) -> None:
    for name in ("settings.json", "queue.json"):
        made = [
            mutate_json(written[name], random.Random(s), JSON_KINDS[s % len(JSON_KINDS)], tmp_path)[0]
            for s in range(CASES)
        ]
        again = [
            mutate_json(written[name], random.Random(s), JSON_KINDS[s % len(JSON_KINDS)], tmp_path)[0]
            for s in range(CASES)
        ]
        assert made == again and written[name] not in made, name
