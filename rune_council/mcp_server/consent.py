"""Consent to dispatch external AI CLIs, for one MCP connection.

The rules are the library's (``rune_council.consent``, applied by the intake): the
operator's ``--yes``, then the environment and ``council.toml``, then an earlier yes at the
terminal prompt. When none of them has decided and the host supports elicitation, the user
is asked once per connection and the answer holds for that connection only. Nothing in a
tool call takes part: the intake refuses ``yes`` from a caller who is not the operator, so a
host model cannot grant itself consent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp import types

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from ..paths import RuneDir
    from .settings import ServerSettings

FIELD = "allow"


@dataclass(frozen=True)
class Decision:
    """``allow`` for the library (None: let its standing settings decide) and, when this
    door decided, the words the run file's ``runtime_report.consent`` should carry."""

    allow: bool | None
    recorded_as: str | None = None


class ConnectionConsent:
    def __init__(self, settings: ServerSettings, where: RuneDir) -> None:
        self._settings = settings
        self._where = where
        self._asked: Decision | None = None
        self._lock = asyncio.Lock()

    async def decide(
        self, session: ServerSession, request_id: types.RequestId | None, *, undecided: bool
    ) -> Decision:
        """``undecided``: the intake found nothing standing (``Prepared.consent_undecided``)."""
        if self._settings.yes:
            return Decision(True, "granted (rune council mcp --yes)")
        if not undecided or not _can_elicit(session):
            return Decision(None)
        async with self._lock:  # two concurrent calls still ask only once
            if self._asked is None:
                self._asked = await self._ask(session, request_id)
            return self._asked

    async def _ask(self, session: ServerSession, request_id: types.RequestId | None) -> Decision:
        from ..discovery.assembly import assemble_clis

        found = await assemble_clis(self._where, env=self._settings.env, allow_external=True)
        names = [r.name for r in found.runtimes]
        if not names:
            return Decision(None)
        message = (
            f"rune council would send the question (and any artifact) to {', '.join(names)}, "
            "which pass it to the model services they are configured for. Allow external AI "
            "CLIs for this session? (No: the council uses subagents only.)"
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
        except Exception as exc:  # a host that advertised elicitation but failed at it
            return Decision(False, f"not granted (the host's consent prompt failed: {exc})")
        granted = answer.action == "accept" and (answer.content or {}).get(FIELD) is True
        if granted:
            return Decision(True, "granted (by the user at the MCP host's prompt)")
        how = "declined" if answer.action != "cancel" else "dismissed"
        return Decision(False, f"not granted (the user {how} the MCP host's prompt)")


def _can_elicit(session: ServerSession) -> bool:
    # A client that declared elicitation, on a connection that can carry a request back to
    # it (a 2026-07-28 connection answers each request in one reply, and cannot).
    capabilities = session.client_capabilities
    return (
        capabilities is not None
        and capabilities.elicitation is not None
        and session.can_send_request
    )
