"""The real-model tier: councils answered by small real models on a loopback server."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "real_models: councils answered by real small models served on 127.0.0.1 "
        "(install with tests/real_models/install.sh)",
    )
