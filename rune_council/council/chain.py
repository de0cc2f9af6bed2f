"""A council chain: a red team attacks first, then a standard council weighs its risk register.

Two ordinary runs with two run files: ``<id>.red-team`` and ``<id>``. The second run's voices
get the register as context, and its result names the red-team run it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import CouncilResult, DeliberationOptions, PerspectiveRequest, RoundsOptions
from ..deliberation.redteam import register_as_context
from .lifecycle import run_blocking
from .options import CouncilOptions
from .pipeline import aconvene
from .request import parse_request

RED_TEAM_SUFFIX = ".red-team"
MAX_ID = 128


def red_team_id(run_id: str) -> str:
    # A trailing dot would make ".." with the suffix, which run ids refuse.
    return run_id[: MAX_ID - len(RED_TEAM_SUFFIX)].rstrip(".") + RED_TEAM_SUFFIX


async def aconvene_chain(
    request: PerspectiveRequest | Mapping[str, Any], options: CouncilOptions | None = None
) -> CouncilResult:
    """Run the red team, then the standard council; returns the standard council's result."""
    req = parse_request(request)
    base = req.deliberation or DeliberationOptions()
    red_request = req.model_copy(
        update={
            "id": red_team_id(req.id),
            "deliberation": base.model_copy(
                update={
                    "council_type": "red_team",
                    "method": "rank",
                    "rounds": RoundsOptions(),
                    "context": None,
                    "chained_from": None,
                }
            ),
        }
    )
    red = await aconvene(red_request, options)
    register = red.deliberation.risk_register if red.deliberation else None
    context = (
        register_as_context(register, red.id)
        if register is not None
        else f"The red-team council {red.id} produced no risk register ({red.status})."
    )
    standard = req.model_copy(
        update={
            "deliberation": base.model_copy(
                update={"council_type": "standard", "context": context, "chained_from": red.id}
            )
        }
    )
    return await aconvene(standard, options)


def convene_chain(
    request: PerspectiveRequest | Mapping[str, Any], options: CouncilOptions | None = None
) -> CouncilResult:
    """Blocking form of :func:`aconvene_chain`."""
    return run_blocking(lambda: aconvene_chain(request, options))
