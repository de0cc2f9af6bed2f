"""Red team: the same pipeline pointed at failure, ending in a risk register.

Members are attackers: their first prompt asks for every way the proposal can fail, each
risk as a claim with an RFC 2119 severity. They rank each other by severity and novelty, and
the chairman turns the ranked attacks into a register (category, description, severity,
likelihood, identified_by, mitigation) with a summary. Without a usable chairman answer the
register is built from the claim clusters and marked ``fallback: "arithmetic"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core import safejson
from ..core.contract import ClaimCluster, Risk, RiskRegister, RiskSeverity, Severity, Voice
from ..stages.allocate import SlotPrompts

ATTACK = (
    "This council is a red team. You are an attacker, not an advisor: find every way the "
    "proposal or plan in question can fail: security, data loss, reliability, cost, legal, "
    "people and process. Each risk is one claim; give it severity MUST (critical: must be "
    "fixed before going ahead), SHOULD (high) or MAY (medium or low), and cite the place it "
    "comes from. Begin your stance with NO if you found a risk that must be fixed, MIXED if "
    "you found only lesser risks, YES only if a genuine attack found nothing."
)

_SEVERITY: Mapping[Severity | None, RiskSeverity] = {
    "MUST": "critical",
    "SHOULD": "high",
    "MAY": "medium",
    None: "unrated",
}
_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "unrated": 4}
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def attack_prompts(prompts: Mapping[str, SlotPrompts]) -> dict[str, SlotPrompts]:
    return {
        vid: SlotPrompts(
            primary=f"{ATTACK}\n\n{p.primary}",
            fallback=f"{ATTACK}\n\n{p.fallback}",
            fallback_persona=p.fallback_persona,
        )
        for vid, p in prompts.items()
    }


def register_prompt(question: str, attacks: str) -> str:
    return (
        "You chair a red-team council. The attackers' findings are below, best first by "
        "their own blind ranking (severity and novelty). Produce the risk register: merge "
        "risks that are the same, keep different ones apart, invent none.\n\n"
        f"Target of the attack:\n{question}\n\n{attacks}\n\n"
        "Reply with one JSON object and nothing else:\n"
        '{"risks": [{"category": "security|reliability|data|cost|legal|process|other", '
        '"description": "...", "severity": "critical|high|medium|low", '
        '"likelihood": "high|medium|low", "identified_by": ["<answer label>"], '
        '"mitigation": "..."}], "summary": "<counts by severity and the main concern>"}\n'
    )


class _WireRisk(BaseModel):
    model_config = ConfigDict(extra="ignore")
    category: str
    description: str
    severity: str
    likelihood: str = "unrated"
    identified_by: list[str] = []
    mitigation: str | None = None


class _WireRegister(BaseModel):
    model_config = ConfigDict(extra="ignore")
    risks: list[_WireRisk]
    summary: str


def read_register(text: str, labels: Mapping[str, str], by: str) -> tuple[RiskRegister | None, str]:
    """The chairman's register, with answer labels turned back into voice ids."""
    blocks = _FENCE.findall(text) or [text]
    last_error = "no JSON object found"
    for block in reversed(blocks):
        start, end = block.find("{"), block.rfind("}")
        if start == -1 or end <= start:
            continue
        try:
            doc = safejson.loads(block[start : end + 1], what="risk register")
            wire = _WireRegister.model_validate(doc)
        except (json.JSONDecodeError, ValidationError) as exc:
            last_error = f"register does not parse: {str(exc).splitlines()[0]}"
            continue
        risks: list[Risk] = []
        for r in wire.risks:
            severity = r.severity.lower().strip()
            likelihood = r.likelihood.lower().strip()
            if severity not in _ORDER or likelihood not in ("high", "medium", "low", "unrated"):
                return (
                    None,
                    f"risk {r.description[:60]!r} has severity/likelihood outside the scale",
                )
            # Checked against the scales just above, so validation cannot fail here.
            risks.append(
                Risk.model_validate(
                    {
                        "category": r.category.strip() or "other",
                        "description": r.description.strip(),
                        "severity": severity,
                        "likelihood": likelihood,
                        "identified_by": sorted(
                            {labels.get(x.strip(), x.strip()) for x in r.identified_by}
                        ),
                        "mitigation": (r.mitigation or "").strip() or None,
                    }
                )
            )
        if not wire.summary.strip():
            return None, "register without a summary"
        risks.sort(key=lambda r: (_ORDER[r.severity], -len(r.identified_by)))
        return RiskRegister(risks=risks, summary=wire.summary.strip(), by=by), "ok"
    return None, last_error


def arithmetic_register(
    voices: Sequence[Voice], clusters: Sequence[ClaimCluster], reason: str
) -> RiskRegister:
    """One risk per claim cluster (split when members contradict each other)."""
    claims = {c.id: c for v in voices if v.status == "complete" for c in v.claims}
    risks: list[Risk] = []
    for cluster in clusters:
        members = [claims[i] for i in cluster.claim_ids if i in claims]
        groups = [[c] for c in members] if cluster.conflicting else [members]
        for group in groups:
            if not group:
                continue
            strongest = min(
                (c.severity for c in group), key=lambda s: ("MUST", "SHOULD", "MAY", None).index(s)
            )
            risks.append(
                Risk(
                    category="unclassified",
                    description=group[0].text,
                    severity=_SEVERITY[strongest],
                    identified_by=sorted({c.voice_id for c in group}),
                )
            )
    risks.sort(key=lambda r: (_ORDER[r.severity], -len(r.identified_by)))
    counts = {s: sum(1 for r in risks if r.severity == s) for s in _ORDER}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no risk reported"
    return RiskRegister(
        risks=risks,
        summary=f"{len(risks)} risk(s): {summary}. Built from the members' claims; "
        "category, likelihood and mitigation were not assessed.",
        fallback="arithmetic",
        fallback_reason=reason,
    )


def register_as_context(register: RiskRegister, run_id: str) -> str:
    lines = [f"Risk register from red-team council {run_id}: {register.summary}"]
    for r in register.risks:
        mitigation = f" Mitigation: {r.mitigation}" if r.mitigation else ""
        lines.append(
            f"- [{r.severity}, likelihood {r.likelihood}, {r.category}] {r.description}{mitigation}"
        )
    return "\n".join(lines)
