"""One headless Chromium for each web test module (tests/web/chromium.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.chromium import launched


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium
