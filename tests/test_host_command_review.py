"""`/rune council review` in a host: the installed command sends the host to the review
door with options that door really has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from tests.test_host_command_intake import COMMANDS, install

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("host", sorted(COMMANDS))
def test_the_command_routes_review_to_the_review_door_with_its_own_options(
    tmp_path: Path, host: str
) -> None:
    text = install(tmp_path, host)
    if host == "gemini":
        text = text.replace('\\"', '"')
    assert "/rune council review [REV_RANGE] [options]" in text
    assert "rune council review --format markdown [options]" in text
    listed = re.search(r"options are those of `rune council review --help`:\n(.*?)\. ", text, re.S)
    assert listed is not None, text[:400]
    offered = re.findall(r"`(--[a-z-]+)`", listed.group(1))
    import rune_council.cli  # noqa: F401  (registers the commands)
    from rune_council.cli.app import council_app

    review = typer.main.get_command(council_app).commands["review"]  # type: ignore[attr-defined]
    flags = {opt for param in review.params for opt in param.opts}
    assert offered and set(offered) <= flags, set(offered) - flags
    # What only the operator decides is not offered to the host.
    assert not {"--yes", "--subagent-cmd", "--key-env"} & set(offered)
