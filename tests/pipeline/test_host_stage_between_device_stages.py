"""A stage on the host that draws on a frame another stage keeps on the device (a face processor
between the swap and the enhancer of a device-path render) sends the regions it changed up
through the render's `DevicePixels`: counted like every other crossing, never a hidden copy."""

from __future__ import annotations

import numpy as np
import torch

from ffdesk.pipeline.stage import ChangedRegion, FramePacket
from ffdesk.pipeline.stages.device_redraw import DeviceFrames
from ffdesk.pipeline.stages.redraw import mirror_to_device
from ffdesk.runtime.device import DevicePixels


def test_a_region_drawn_on_the_host_goes_up_counted() -> None:
    frames = DeviceFrames(DevicePixels(torch.device("cpu")))
    packet = FramePacket(0, 0, np.zeros((48, 64, 3), np.uint8))
    on_device = frames.frame(packet)  # a device stage kept the frame there
    assert packet.device_pixels is frames.pixels
    packet.image = packet.image.copy()
    packet.image[10:20, 5:30] = 200  # a host stage draws a face's box
    mirror_to_device(packet, ChangedRegion(5, 10, 30, 20))
    assert torch.equal(on_device, torch.from_numpy(packet.image))
    ups = [t for t in frames.pixels.transfers.snapshot() if t.kind == "host-regions"]
    assert [(t.direction, t.copies, t.nbytes) for t in ups] == [("up", 1, 10 * 25 * 3)]


def test_a_frame_no_device_stage_kept_sends_nothing_up() -> None:
    packet = FramePacket(0, 0, np.zeros((48, 64, 3), np.uint8))
    mirror_to_device(packet, ChangedRegion(0, 0, 8, 8))  # no device frame: nothing to mirror
    assert packet.device_image is None


def test_released_frames_let_go_of_their_uploader_too() -> None:
    frames = DeviceFrames(DevicePixels(torch.device("cpu")))
    packet = FramePacket(0, 0, np.zeros((8, 8, 3), np.uint8))
    frames.frame(packet)
    DeviceFrames.release([packet])
    assert packet.device_image is None and packet.device_pixels is None
