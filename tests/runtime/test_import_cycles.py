"""No two modules of the runtime (or the driver layer under it) import each other, lazily or not."""

from __future__ import annotations

import itertools

import pytest

grimp = pytest.importorskip("grimp")


def _cycles(graph: object, prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
    mods = sorted(m for m in graph.modules if m.startswith(prefixes))  # type: ignore[attr-defined]
    return [
        (a, b)
        for a, b in itertools.combinations(mods, 2)
        if graph.find_shortest_chain(a, b) and graph.find_shortest_chain(b, a)  # type: ignore[attr-defined]
    ]


def test_runtime_and_hw_modules_have_no_import_cycle() -> None:
    graph = grimp.build_graph("ffdesk", cache_dir=None)
    assert graph.find_shortest_chain("ffdesk.runtime.precision", "ffdesk.runtime.files") is None
    assert _cycles(graph, ("ffdesk.runtime.", "ffdesk.hw.")) == []


def test_the_check_sees_a_cycle_an_added_import_makes() -> None:
    graph = grimp.build_graph("ffdesk", cache_dir=None)
    graph.add_import(importer="ffdesk.runtime.integrity", imported="ffdesk.runtime.files")
    assert ("ffdesk.runtime.files", "ffdesk.runtime.integrity") in _cycles(graph, ("ffdesk.runtime.",))
