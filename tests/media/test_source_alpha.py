"""A source with an alpha channel (ProRes 4444 as compositing and titling apps export it): the
render keeps no transparency, and says so before a long render, as `ffdesk probe` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.media.inspect import inspect_clip
from ffdesk.media.probe import probe


def test_prores_4444_alpha_is_a_warning(tmp_path: Path) -> None:
    from tests.media import corpus

    reason = corpus.unavailable("mov_prores4444")
    if reason:
        pytest.skip(reason)
    path = corpus.make("mov_prores4444", tmp_path).path
    r = inspect_clip(path, encoder="prores")
    said = [w for w in r.warnings if w.startswith("alpha channel (yuva444p12le)")]
    assert len(said) == 1, r.warnings
    assert said[0] in probe(path).warnings  # what a render prints before its frames


def test_no_alpha_no_warning(tmp_path: Path) -> None:
    from tests.media import corpus

    r = inspect_clip(corpus.make("mov_dnxhd", tmp_path).path)
    assert not [w for w in r.warnings if "alpha" in w], r.warnings
