from __future__ import annotations

import pytest

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.types import Frame
from tests.faces import photos


@pytest.fixture(scope="session")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


@pytest.fixture(scope="session")
def astronaut() -> Frame:
    return photos.astronaut()


@pytest.fixture(scope="session")
def grace() -> Frame:
    return photos.grace_hopper()
