"""The preview pane: the current frame swapped, a before/after split, faces outlined and clickable."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from ffdesk.gui.accessible import on_window
from ffdesk.gui.fitting import ShrinkingLabel, compact
from ffdesk.gui.models import SessionModel
from ffdesk.types import Frame

SPLIT_GRAB_PX = 8
LABEL_BACKING = QColor(0, 0, 0, 150)
"""Behind "before" and "after": legible on a bright picture as on a dark one."""
LABEL_MARGIN = 6
"""From the label to the edge of the picture in view."""
LABEL_PAD = 4
FRAME_SAMPLE = "frame 0000 / 0000   00:00:00:00"
"""The frame counter's usual widest text (a clip of up to 9999 frames)."""


def to_qimage(image: Frame) -> QImage:
    """A QImage sharing nothing with `image` (safe after the array is gone; any thread)."""
    image = np.ascontiguousarray(image)
    h, w = image.shape[:2]
    return QImage(image.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


@dataclass(frozen=True)
class DisplayImages:
    """A preview's before/after scaled to fit the canvas, made on the worker thread so the main
    thread only blits them."""

    original: QImage
    processed: QImage


def display_images(
    original: Frame, processed: Frame, width: int, height: int, pixel_aspect: float = 1.0
) -> DisplayImages:
    """Both frames at the shape a player shows them (`pixel_aspect`: width / height of one pixel)
    and scaled down (never up) to fit `width` x `height`, as QImages. Thread-safe."""
    h, w = processed.shape[:2]
    shown_w = w * pixel_aspect
    s = min(1.0, width / shown_w, height / h) if width > 0 and height > 0 else 1.0
    size = (max(1, round(shown_w * s)), max(1, round(h * s)))

    def fit(img: Frame) -> QImage:
        if size != (img.shape[1], img.shape[0]):
            img = np.asarray(cv2.resize(img, size, interpolation=cv2.INTER_AREA), np.uint8)
        return to_qimage(img)

    return DisplayImages(fit(original), fit(processed))


class PreviewCanvas(QWidget):
    """Paints original | processed around the split line; clicking a face picks the reference."""

    faceClicked = Signal(int)

    sizeChanged = Signal(int, int)

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setMinimumSize(320, 180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # a click here takes the keys back from a field
        self._src_size: tuple[int, int] | None = None
        self._pixel_aspect = 1.0
        """Width / height of one pixel of the clip as shown (non-square pixels: not 1)."""
        self._fit: tuple[QImage, QImage] | None = None
        self._full: tuple[QImage, QImage] | None = None
        self._dragging = False
        self._pan = QPointF(0, 0)
        """Offset of the image at 100% zoom (drag to pan)."""
        self._pan_from: QPointF | None = None
        self.drop_hint = ""
        """What a drop hovering over the window will do (drawn over the picture; "" : none)."""
        model.previewChanged.connect(self._on_preview)
        model.viewChanged.connect(self.update)
        model.referenceChanged.connect(self.update)
        model.targetChanged.connect(self._on_target)
        model.playingChanged.connect(self.describe)  # (said once playback stops, not each frame)
        self.setAccessibleName("Preview")  # (a screen reader finds no text in a drawn picture)
        for changed in (model.viewChanged, model.referenceChanged, model.positionChanged):
            changed.connect(self.describe)
        self.describe()

    def describe(self) -> None:
        """Say what the picture shows to a screen reader: the clip, the frame, the view, the
        faces found (a few words, made as the picture changes)."""
        m = self.model
        if m.playing:
            return
        if m.clip is None:
            text = "no clip open: drop a clip here, or File > Open"
        else:
            clip = m.clip
            where = f"frame {m.position + 1} of {clip.frame_count} ({clip.timecode(m.position)})"
            parts = [f"{clip.path.name}, {where}"]
            if m.player:
                parts.append("as rendered")
            elif self._split_shown():
                parts.append(f"before left, after right, split at {round(m.split * 100)}%")
            else:
                parts.append("swapped")
            parts.append("fit to the pane" if m.zoom_fit else "at 100%")
            result = m.preview
            if result is None or self._src_size is None:
                parts.append("loading the preview")
            elif not m.player:
                count = len(result.faces)
                ref = m.reference_face
                chosen = f", face {ref + 1} chosen" if ref is not None and 0 <= ref < count else ""
                parts.append(f"{count} face{'' if count == 1 else 's'} found{chosen}")
            text = "; ".join(parts)
        if text != self.accessibleDescription():
            self.setAccessibleDescription(text)

    def _on_target(self) -> None:
        self._src_size = self._fit = self._full = None
        self._pan = QPointF(0, 0)
        self.describe()
        self.update()

    def _on_preview(self, result: object) -> None:
        from ffdesk.pipeline.preview import PreviewResult

        assert isinstance(result, PreviewResult)
        h, w = result.processed.shape[:2]
        self._src_size = (w, h)
        self._pixel_aspect = result.pixel_aspect if result.pixel_aspect > 0 else 1.0
        shown = self.model.preview_display
        self._fit = (shown.original, shown.processed) if isinstance(shown, DisplayImages) else None
        self._full = None
        self.describe()
        self.update()

    def set_drop_hint(self, text: str) -> None:
        if text != self.drop_hint:
            self.drop_hint = text
            self.update()

    def _paint_drop_hint(self, p: QPainter) -> None:
        if not self.drop_hint:
            return
        p.fillRect(self.rect(), QColor(40, 110, 200, 90))
        p.setPen(QPen(QColor(120, 180, 255), 4, Qt.PenStyle.DashLine))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(self.rect().adjusted(4, 4, -4, -4))
        p.setPen(QColor(255, 255, 255))
        font = p.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        font.setBold(True)
        p.setFont(font)
        p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.drop_hint)

    def images(self) -> tuple[QImage, QImage] | None:
        """(before, after) to draw now: the worker's display-sized pair when fitting, else full size."""
        if self._src_size is None:
            return None
        if self.model.zoom_fit and self._fit is not None:
            return self._fit
        if self._full is None and self.model.preview is not None:
            r = self.model.preview
            self._full = (to_qimage(r.original), to_qimage(r.processed))
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.sizeChanged.emit(self.width(), self.height())

    def image_rect(self) -> QRectF:
        """Where the image is drawn, in widget coordinates."""
        if self._src_size is None:
            return QRectF()
        w, h = self._src_size
        shown_w = w * self._pixel_aspect
        if self.model.zoom_fit:
            s = min(self.width() / shown_w, self.height() / h)
        else:
            s = 1.0 / (self.model.preview.scale if self.model.preview else 1.0)
        dw, dh = shown_w * s, h * s
        rect = QRectF((self.width() - dw) / 2, (self.height() - dh) / 2, dw, dh)
        if not self.model.zoom_fit:
            rect.translate(self._pan)
        return rect

    def _split_shown(self) -> bool:
        """The before/after split (never in the player: there is no "after" to compare)."""
        return self.model.show_before and not self.model.player

    def split_x(self) -> float:
        r = self.image_rect()
        return r.left() + r.width() * self.model.split

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(24, 24, 28))
        pair = self.images()
        if pair is None:
            p.setPen(QColor(150, 150, 160))
            text = "Drop a clip here, or File > Open" if self.model.clip is None else "Loading preview…"
            if not self.drop_hint:
                p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, text)
            self._paint_drop_hint(p)
            p.end()
            return
        before, after = pair
        r = self.image_rect()
        # Display-sized images are drawn 1:1; smoothing only when a full-size one must be scaled.
        exact = abs(after.width() - r.width()) <= 2 and abs(after.height() - r.height()) <= 2
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, not exact and self.model.zoom_fit)
        p.drawImage(r, after)
        if self._split_shown():
            sx = self.split_x()
            p.drawImage(
                QRectF(r.left(), r.top(), sx - r.left(), r.height()),
                before,
                QRectF(0, 0, before.width() * self.model.split, before.height()),
            )
            p.setPen(QPen(QColor(255, 255, 255), 2))
            p.drawLine(QPointF(sx, r.top()), QPointF(sx, r.bottom()))
            p.setBrush(QColor(255, 255, 255))
            p.drawEllipse(QPointF(sx, r.center().y()), 6, 6)
            self._paint_labels(p)
        self._paint_faces(p, r)
        self._paint_drop_hint(p)
        p.end()

    def split_labels(self) -> tuple[QRectF, QRectF] | None:
        """Where "before" and "after" go: the top corners of the part of the picture in view (at
        100% the picture can be larger than the pane); None when none of it is."""
        shown = self.image_rect().intersected(QRectF(self.rect()))
        if shown.isEmpty():
            return None
        fm = self.fontMetrics()
        height = fm.height() + LABEL_PAD
        top = shown.top() + LABEL_MARGIN

        def box(text: str, left: float) -> QRectF:
            return QRectF(left, top, fm.horizontalAdvance(text) + 2 * LABEL_PAD, height)

        before = box("before", shown.left() + LABEL_MARGIN)
        after = box("after", 0.0)
        after.moveRight(shown.right() - LABEL_MARGIN)
        return before, after

    def _paint_labels(self, p: QPainter) -> None:
        boxes = self.split_labels()
        if boxes is None:
            return
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(LABEL_BACKING)
        for box in boxes:
            p.drawRoundedRect(box, 3, 3)
        p.setPen(QColor(255, 255, 255))
        for box, text in zip(boxes, ("before", "after"), strict=True):
            p.drawText(box, Qt.AlignmentFlag.AlignCenter, text)

    def _face_scale(self) -> float:
        """Shown pixels per working-frame pixel: the faces are found in the working frame, and a
        frame enhancer's final-mode preview is 2, 4 or 8 times larger; else 1."""
        r = self.model.preview
        if r is None or not r.original.shape[1]:
            return 1.0
        return float(r.processed.shape[1]) / float(r.original.shape[1])

    def _paint_faces(self, p: QPainter, r: QRectF) -> None:
        result = self.model.preview
        if result is None or self._src_size is None:
            return
        k = self._face_scale()
        sx, sy = k * r.width() / self._src_size[0], k * r.height() / self._src_size[1]
        for i, face in enumerate(result.faces):
            x1, y1, x2, y2 = face.bbox
            chosen = self.model.reference_face == i
            colour = QColor(255, 190, 40) if chosen else QColor(80, 200, 255)
            p.setPen(QPen(colour, 3 if chosen else 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(r.left() + x1 * sx, r.top() + y1 * sy, (x2 - x1) * sx, (y2 - y1) * sy))
            p.drawText(QPointF(r.left() + x1 * sx + 3, r.top() + y1 * sy - 4), f"face {i + 1}")

    def face_at(self, pos: QPointF) -> int | None:
        """Index of the face under a widget position (smallest box wins), or None."""
        result = self.model.preview
        r = self.image_rect()
        if result is None or r.isEmpty() or self._src_size is None:
            return None
        k = self._face_scale()
        x = (pos.x() - r.left()) * self._src_size[0] / r.width() / k
        y = (pos.y() - r.top()) * self._src_size[1] / r.height() / k
        hits = [
            (f.area, i)
            for i, f in enumerate(result.faces)
            if f.bbox[0] <= x <= f.bbox[2] and f.bbox[1] <= y <= f.bbox[3]
        ]
        return min(hits)[1] if hits else None

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if self._split_shown() and abs(pos.x() - self.split_x()) <= SPLIT_GRAB_PX:
            self._dragging = True
            return
        face = self.face_at(pos)
        if face is not None:
            self.model.set_reference_face(face)
            self.faceClicked.emit(face)
        elif not self.model.zoom_fit:
            self._pan_from = pos - self._pan

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if self._dragging:
            r = self.image_rect()
            if r.width() > 0:
                self.model.set_split((pos.x() - r.left()) / r.width())
            return
        if self._pan_from is not None:
            self._pan = pos - self._pan_from
            self.update()
            return
        near = self._split_shown() and abs(pos.x() - self.split_x()) <= SPLIT_GRAB_PX
        if near:
            self.setCursor(Qt.CursorShape.SplitHCursor)
        elif self.face_at(pos) is not None:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
        else:
            self.unsetCursor()

    def mouseReleaseEvent(self, _event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._dragging = False
        self._pan_from = None


class PreviewView(QWidget):
    """The canvas with its small toolbar: before/after, zoom, frame number and timecode."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.canvas = PreviewCanvas(model)
        self.before_after = compact(QPushButton("Before/after (B)"))
        self.before_after.setCheckable(True)
        self.before_after.setChecked(model.show_before)
        self.before_after.toggled.connect(model.set_show_before)
        self.fit = compact(QPushButton("Fit"))
        self.fit.setCheckable(True)
        self.actual = compact(QPushButton("100%"))
        self.actual.setCheckable(True)
        self.fit.clicked.connect(lambda: model.set_zoom_fit(True))
        self.actual.clicked.connect(lambda: model.set_zoom_fit(False))
        self.frame_label = QLabel("no clip")
        self.frame_label.setObjectName("frameLabel")
        # as wide as a long clip's from the start: the window's least width does not grow when one opens
        self.frame_label.setMinimumWidth(self.frame_label.fontMetrics().horizontalAdvance(FRAME_SAMPLE))
        self.timing_label = ShrinkingLabel("0000 ms")  # gives way first in a narrow window
        self.timing_label.setStyleSheet(f"color: {on_window('gray')}")
        self.player_label = QLabel("Player: as rendered")
        self.player_label.setToolTip("shown as it is, not processed again; File > Open clip to edit a clip")
        self.player_label.setObjectName("playerLabel")
        self.player_label.setStyleSheet(
            "color: #111; background: #e0b040; padding: 2px 6px; border-radius: 3px"
        )
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        for w in (self.before_after, self.fit, self.actual):
            bar.addWidget(w)
        bar.addWidget(self.player_label)
        bar.addStretch(1)
        bar.addWidget(self.timing_label)
        bar.addWidget(self.frame_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        model.viewChanged.connect(self._sync)
        model.positionChanged.connect(self._sync)
        model.targetChanged.connect(self._sync)
        model.previewChanged.connect(self._on_preview)
        self._sync()

    def _on_preview(self, result: object) -> None:
        ms = getattr(result, "ms", None)
        self.timing_label.setText(f"{ms:.0f} ms" if isinstance(ms, float) else "")
        self._sync()

    def _sync(self) -> None:
        m = self.model
        self.before_after.setChecked(m.show_before)
        self.fit.setChecked(m.zoom_fit)
        self.actual.setChecked(not m.zoom_fit)
        self.player_label.setVisible(m.clip is not None and m.player)
        self.before_after.setEnabled(not m.player)
        if m.clip is None:
            self.frame_label.setText("no clip")
        else:
            self.frame_label.setText(
                f"frame {m.position + 1} / {m.clip.frame_count}   {m.clip.timecode(m.position)}"
            )
        self.canvas.update()
