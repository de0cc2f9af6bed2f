"""Consent to send a council's question out (external AI CLIs, endpoints), for one connection.

The rules are the library's (``rune_council.consent``, applied by the intake): the
operator's ``--yes``, then the environment and ``council.toml``, then a yes the user gave
for this project (``rune council consent``, or earlier at the terminal prompt). When none of
them has decided and something external would get the question, the user decides:

- a host that declared MCP elicitation (form mode) asks them; a yes or a no holds for this
  connection. A prompt that was dismissed, or that the host could not show (a headless
  host answers ``cancel`` by itself), is no answer, so nothing is recorded in the user's
  name and the next call asks again;
- otherwise, or when the prompt got no answer, the call answers "needs consent" with the
  one command the user runs to allow it for this project.

Nothing in a tool call can grant it: the intake refuses ``yes`` from a caller who is not the
operator. A caller may only keep the question here (``subagents_only``).
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp import types

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from ..core.paths import RuneDir
    from ..council.intake import Prepared
    from .settings import ServerSettings

FIELD = "allow"


@dataclass(frozen=True)
class Decision:
    """``allow`` for the library (None: let its standing settings decide) and, when this
    door decided, the words the run file's ``runtime_report.consent`` should carry.
    ``needs_consent``: nobody has decided and these would get the question, so the call
    must not run until the user says."""

    allow: bool | None
    recorded_as: str | None = None
    needs_consent: tuple[str, ...] = ()


def grant_command(rune_dir: RuneDir, env: dict[str, str]) -> str:
    """The one command that allows external dispatch for this server's project, spelled so
    it works from any directory of the user's shell."""
    program = "rune" if shutil.which("rune", path=env.get("PATH")) else None
    launch = program or f"{shlex.quote(sys.executable)} -m rune_council.cli"
    return f"{launch} council consent --rune-dir {shlex.quote(str(rune_dir.root))}"


class ConnectionConsent:
    def __init__(self, settings: ServerSettings, where: RuneDir) -> None:
        self._settings = settings
        self._where = where
        self._answered: Decision | None = None
        self._lock = asyncio.Lock()

    async def decide(
        self,
        session: ServerSession,
        request_id: types.RequestId | None,
        prepared: Prepared,
        *,
        subagents_only: bool = False,
    ) -> Decision:
        if subagents_only:
            return Decision(False, "not used (the user asked for this host's subagents only)")
        if self._settings.yes:
            return Decision(True, "granted (rune council mcp --yes)")
        if not prepared.consent_undecided:
            return Decision(None)
        async with self._lock:  # two concurrent calls still ask only once
            if self._answered is not None:
                return self._answered
            names = await self._would_send_to(prepared)
            if not names:
                return Decision(None)  # nothing external here: nothing to consent to
            if _can_elicit(session):
                answer = await self._ask(session, request_id, names)
                if answer is not None:
                    self._answered = answer
                    return answer
            return Decision(None, needs_consent=tuple(names))

    async def _would_send_to(self, prepared: Prepared) -> list[str]:
        from ..discovery.assembly import assemble_clis

        found = await assemble_clis(
            self._where,
            env=self._settings.env,
            allow_external=True,
            config=prepared.options.config,
        )
        names = [r.name for r in found.runtimes]
        setup = prepared.options.endpoints
        if setup is not None:
            names += [f"endpoint {spec.name}" for spec in setup.endpoints]
        return names

    async def _ask(
        self, session: ServerSession, request_id: types.RequestId | None, names: list[str]
    ) -> Decision | None:
        """The user's yes or no at the host's prompt; None when the prompt got no answer."""
        message = (
            f"rune council would send the question (and any artifact) to {', '.join(names)}, "
            "which pass it to the model services they are configured for. Allow it for this "
            "session? (No: this host's own subagents answer instead.)"
        )
        schema: types.ElicitRequestedSchema = {
            "type": "object",
            "properties": {
                FIELD: {
                    "type": "boolean",
                    "title": "Allow external AI CLIs",
                    "description": f"Send council prompts to {', '.join(names)}",
                }
            },
            "required": [FIELD],
        }
        try:
            answer = await session.elicit_form(message, schema, related_request_id=request_id)
        except Exception:  # a host that declared elicitation but could not show the prompt
            return None
        if answer.action == "cancel":
            return None
        if answer.action == "accept" and (answer.content or {}).get(FIELD) is True:
            return Decision(True, "granted (by the user at the MCP host's prompt)")
        return Decision(False, "not granted (the user declined the MCP host's prompt)")


def _can_elicit(session: ServerSession) -> bool:
    # A client that declared form elicitation (an empty declaration means form), on a
    # connection that can carry a request back to it (a 2026-07-28 connection answers each
    # request in one reply, and cannot).
    capabilities = session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or not session.can_send_request:
        return False
    return elicitation.form is not None or elicitation.url is None
