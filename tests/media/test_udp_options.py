"""`--stream udp://HOST:PORT?OPTIONS`: the options the user gives reach FFmpeg's UDP protocol
(they were dropped: `?broadcast=1` could not stream to a broadcast address at all)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from ffdesk.media.stream import UDP_PACKET, Picture, UdpStream, udp_options


@pytest.mark.parametrize(
    ("url", "query"),
    [
        ("udp://127.0.0.1:5000", f"pkt_size={UDP_PACKET}"),
        ("udp://255.255.255.255:5605?broadcast=1", f"broadcast=1&pkt_size={UDP_PACKET}"),
        ("udp://239.0.0.1:5000?ttl=4", f"ttl=4&pkt_size={UDP_PACKET}"),
        ("udp://127.0.0.1:5000?pkt_size=188", "pkt_size=188"),
    ],
)
def test_the_urls_options_are_kept(url: str, query: str) -> None:
    assert udp_options(url) == query


def test_a_packet_size_given_is_the_size_sent() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(10)
        port = receiver.getsockname()[1]
        stream = UdpStream(f"udp://127.0.0.1:{port}?pkt_size=188", width=64, height=48, fps=30)
        try:
            for i in range(5):
                stream.write(Picture(np.full((48, 64, 3), 40 * i, np.uint8)), i / 30)
        finally:
            stream.close()
        sizes = {len(receiver.recv(65536)) for _ in range(3)}
    assert sizes == {188}  # before: 1316, whatever the URL said
