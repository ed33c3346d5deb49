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


def _strongly_connected(graph: object) -> list[list[str]]:
    """Every group of two or more modules that import each other, through any chain (Tarjan's
    algorithm, without recursion)."""
    mods = sorted(graph.modules)  # type: ignore[attr-defined]
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(mods)) for m in mods}  # type: ignore[attr-defined]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in mods:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            for j in range(i, len(edges[node])):
                nxt = edges[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return groups


def test_no_two_modules_of_the_package_import_each_other() -> None:
    """No import cycle anywhere in ffdesk, lazy imports inside functions included (imports for the
    type checker only are left out: they never run)."""
    graph = grimp.build_graph("ffdesk", cache_dir=None, exclude_type_checking_imports=True)
    assert _strongly_connected(graph) == []
    graph.add_import(importer="ffdesk.media.images", imported="ffdesk.media.decode")
    groups = _strongly_connected(graph)
    assert any({"ffdesk.media.decode", "ffdesk.media.images"} <= set(g) for g in groups), groups
