"""The application's style is Fusion, set once: setting it again restyles every widget alive."""

from __future__ import annotations

from typing import Any


def test_fusion_is_set_where_another_style_is_and_kept_after(qapp: Any) -> None:
    from ffdesk.gui.app import application

    app = application()
    try:
        app.setStyle("Windows")
        assert application().style().name().lower() == "fusion"
        style = app.style()
        application()
        application()
        assert app.style() is style  # not made again: each window opened would restyle them all
    finally:
        application()
