"""A council of built-in simulated voices: the whole pipeline with no CLI and no network.

Four voices wear four model-family labels and answer after short delays, so a live view has
something to show: two agree on a verified finding (consensus), one argues the other way
(dissent, and a framing-sensitive perturbation slot), and one fails (a recorded drop). The
answers are fixed text; everything after them (GATE, evidence checks, matching, the stamp)
is the real code, so the result is computed, not canned.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .runtimes.subagent import FunctionRuntime

QUESTION = "Is the invoice migration plan in migration.md safe to run as written?"

ARTIFACT_NAME = "migration.md"
ARTIFACT = """\
# Migration: move invoices onto the ledger schema
1. Announce a 20-minute maintenance window to customers.
2. Add the nullable column ledger_id to invoices.
3. Backfill ledger_id for all 40 million invoices in a single transaction.
4. Switch the billing service to read ledger_id.
5. Drop the old column account_ref in the same deploy.
6. If anything fails, restore last night's backup.
"""


def _claim(text: str, line: int, quote: str, severity: str | None = None) -> dict[str, Any]:
    ref = f"{ARTIFACT_NAME}:{line}"
    claim: dict[str, Any] = {
        "text": text,
        "anchor": ref,
        "evidence": [{"ref": ref, "quote": quote}],
    }
    if severity:
        claim["severity"] = severity
    return claim


_BACKFILL = "Backfill ledger_id for all 40 million invoices in a single transaction."
_DROP = "Drop the old column account_ref in the same deploy."
_RESTORE = "If anything fails, restore last night's backup."
_WINDOW = "Announce a 20-minute maintenance window to customers."


def _answer(stance: str, *claims: dict[str, Any]) -> str:
    body = json.dumps({"question_echo": QUESTION, "stance": stance, "claims": list(claims)})
    return f"```json\n{body}\n```"


# (runtime name, family, seconds before answering, answer or None to fail)
VOICES: tuple[tuple[str, str, float, str | None], ...] = (
    (
        "sim-anthropic",
        "anthropic",
        1.2,
        _answer(
            "NO: the backfill cannot finish inside the window and the drop removes the way back.",
            _claim(
                "A single-transaction backfill of 40 million rows holds its locks far longer "
                "than the 20-minute window",
                4,
                _BACKFILL,
                "MUST",
            ),
            _claim("Dropping account_ref in the same deploy is not safe", 6, _DROP, "MUST"),
        ),
    ),
    (
        "sim-openai",
        "openai",
        1.8,
        _answer(
            "NO: step 3 will overrun the maintenance window.",
            _claim(
                "Backfilling every invoice in one transaction will not complete within the "
                "announced maintenance window",
                4,
                _BACKFILL,
                "MUST",
            ),
            _claim(
                "Restoring last night's backup loses every invoice written since then",
                7,
                _RESTORE,
                "SHOULD",
            ),
        ),
    ),
    (
        "sim-google",
        "google",
        2.4,
        _answer(
            "YES: with the window announced in advance the plan is acceptable.",
            _claim("Customers are warned before the migration starts", 2, _WINDOW, "MAY"),
            _claim("Dropping account_ref in the same deploy is safe", 6, _DROP),
        ),
    ),
    ("sim-xai", "xai", 0.8, None),
)


def _voice(delay_s: float, answer: str | None, runtime: str) -> Any:
    async def respond(prompt: str) -> str:
        del prompt  # the answers are fixed; the prompt was built and sent all the same
        await asyncio.sleep(delay_s)
        if answer is None:
            raise ConnectionError(f"simulated outage: {runtime} answered HTTP 503")
        return answer

    return respond


def demo_runtimes(pace: float = 1.0) -> list[FunctionRuntime]:
    """The simulated voices; ``pace`` scales their delays (0 answers at once)."""
    return [
        FunctionRuntime(
            fn=_voice(delay * pace, answer, name),
            name=name,
            model_family=family,
            family_confidence="confirmed",
        )
        for name, family, delay, answer in VOICES
    ]


def demo_request(run_id: str) -> dict[str, Any]:
    """The demo's PerspectiveRequest as a mapping (``convene`` validates it)."""
    return {
        "id": run_id,
        "question": QUESTION,
        "mode": "critique",
        "n": len(VOICES),
        "artifact": {"name": ARTIFACT_NAME, "text": ARTIFACT},
        "budget": {"per_voice_timeout_s": 60},
    }
