"""Step 6, ARBITRATE: stamp the decorrelation honestly, keep consensus narrow, keep dissent.

Pure arithmetic over the gated, normalized voices: the same inputs give the same result,
so anyone can re-run it from the raw answers in the run file.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field

from ..core.contract import (
    Agreement,
    Checks,
    Claim,
    ClaimCluster,
    ClaimWording,
    ConsensusClaim,
    Decorrelation,
    DissentEntry,
    DissentLabel,
    Severity,
    SlotCheck,
    SlotOutcome,
    Voice,
)
from ..core.made import made
from ..core.records import record
from .normalize import NearVerbatim

SEVERITY_ORDER: dict[Severity | None, int] = {"MUST": 0, "SHOULD": 1, "MAY": 2, None: 3}


@record
class Arbitration:
    decorrelation: Decorrelation
    distinct_families: list[str]
    agreement: Agreement
    checks: Checks
    needs_decision: bool
    decision: str | None
    notes: list[str] = field(default_factory=list)


def counts_for_family(voice: Voice) -> bool:
    """A voice is evidence of an architecture only if it is real, confirmed and valid."""
    return (
        voice.status == "complete"
        and not voice.is_fallback
        and voice.family_confidence == "confirmed"
        and voice.model_family != "unknown"
    )


def decorrelation_of(voices: list[Voice]) -> tuple[Decorrelation, list[str]]:
    families = sorted({v.model_family for v in voices if counts_for_family(v)})
    return ("MULTI_FAMILY" if len(families) >= 2 else "NO_DECORRELATION"), families


def _strongest(claims: list[Claim]) -> Severity | None:
    return min((c.severity for c in claims), key=lambda s: SEVERITY_ORDER[s], default=None)


def _fully_verified(claim: Claim) -> bool:
    return bool(claim.evidence) and all(e.verified == "true" for e in claim.evidence)


def consensus_shortfalls(
    cluster: ClaimCluster, members: list[Claim], voices: dict[str, Voice], stamp: Decorrelation
) -> list[str]:
    """The consensus rule, stated once: what keeps an agreement out of consensus.

    An agreement is consensus exactly when this is empty: the council is MULTI_FAMILY, the
    claims were matched (a shared place and the same point), at least two confirmed,
    non-fallback families made them, and every one rests on evidence the council verified.
    ARBITRATE decides with it and explains a refusal with the same list.
    """
    reasons = []
    counted = {
        voices[c.voice_id].model_family for c in members if counts_for_family(voices[c.voice_id])
    }
    if len(counted) < 2:
        noun = "family" if len(counted) == 1 else "families"
        reasons.append(f"only {len(counted)} confirmed, non-fallback {noun}")
    unverified = [c.id for c in members if not _fully_verified(c)]
    if unverified:
        reasons.append("evidence not mechanically verified for " + ", ".join(unverified))
    if cluster.matched_by is None:
        reasons.append("no shared place and point matched the claims")
    if stamp == "NO_DECORRELATION":
        reasons.append("NO_DECORRELATION: consensus is withheld")
    return reasons


def _slot_check(slot: Voice, outcome: SlotOutcome, detail: str) -> SlotCheck:
    return made(
        SlotCheck,
        voice_id=slot.id,
        reserved=True,
        dispatched=bool(slot.attempts),
        outcome=outcome,
        detail=detail,
    )


_CLEAR = ("yes", "no", "mixed")


def _perturbation_check(valid: list[Voice], allocated: list[Voice]) -> SlotCheck:
    slot = next((v for v in allocated if v.slot_role == "perturbation"), None)
    if slot is None:
        return made(SlotCheck, reserved=False, outcome="not-evaluable", detail="no slot reserved")
    if slot.status != "complete":
        return _slot_check(slot, "not-evaluable", "the perturbation voice did not pass")
    standard = [v for v in valid if v.slot_role == "standard" and v.position in _CLEAR]
    if not standard or slot.position not in _CLEAR:
        return _slot_check(
            slot, "not-evaluable", "no clear YES/NO/MIXED position to compare across framings"
        )
    baseline: str = Counter(v.position or "unclear" for v in standard).most_common(1)[0][0]
    if slot.position == baseline:
        return _slot_check(slot, "held", f"inverted framing still concluded {baseline.upper()}")
    agreeing = ", ".join(v.id for v in standard if v.position == baseline)
    return _slot_check(
        slot,
        "framing-sensitive",
        f"standard reading {baseline.upper()} ({agreeing}), "
        f"inverted framing {(slot.position or 'unclear').upper()} ({slot.id})",
    )


def _cluster_dissent(
    cluster: ClaimCluster,
    label: DissentLabel,
    claim: str,
    detail: str,
    severity: Severity | None = None,
    members: list[ClaimWording] | None = None,
) -> DissentEntry:
    """A cluster kept as dissent: its voices, families and claims, under ``label``."""
    return made(
        DissentEntry,
        claim=claim,
        label=label,
        voice_ids=list(cluster.voice_ids),
        families=list(cluster.families),
        claim_ids=list(cluster.claim_ids),
        severity=severity,
        detail=detail,
        members=members or [],
    )


def _inversion_misses(
    check: SlotCheck,
    voices: list[Voice],
    clusters: list[ClaimCluster],
    claims: dict[str, Claim],
) -> list[DissentEntry]:
    """Agreement among the plain readings that the inverted framing did not reach.

    Only agreement between two or more standard voices is tested: with a single plain
    reading there is no agreement to test, and the reserved slots argue by design.
    """
    if check.voice_id is None or check.outcome == "not-evaluable":
        return []
    role = {v.id: v.slot_role for v in voices}
    missed = []
    for cluster in clusters:
        standard = [v for v in cluster.voice_ids if role.get(v) == "standard"]
        if len(standard) < 2 or cluster.conflicting or check.voice_id in cluster.voice_ids:
            continue
        missed.append(
            _cluster_dissent(
                cluster,
                "framing-sensitive",
                claims[cluster.claim_ids[0]].text,
                f"agreed by {', '.join(standard)} under the plain framing; the inverted "
                f"framing ({check.voice_id}) did not reach it",
            )
        )
    return missed


def _devils_check(
    valid: list[Voice], allocated: list[Voice], clusters: list[ClaimCluster]
) -> SlotCheck | None:
    slot = next((v for v in allocated if v.slot_role == "devils_advocate"), None)
    if slot is None:
        return None
    if slot.status != "complete":
        return _slot_check(slot, "not-evaluable", "the devil's advocate did not pass")
    others = [v.position for v in valid if v.id != slot.id and v.position in ("yes", "no")]
    majority = Counter(others).most_common(1)[0][0] if others else None
    # A counter is a claim nobody else made, a claim opposed to another voice's, or a
    # YES/NO against the forming majority; claims the others share are not counters.
    counters = [
        c for c in clusters if slot.id in c.voice_ids and (len(c.voice_ids) == 1 or c.conflicting)
    ]
    against = majority is not None and slot.position in ("yes", "no") and slot.position != majority
    if not counters and not against:
        return _slot_check(
            slot, "no-counterclaims", "the forming majority held under a mandated attack"
        )
    parts = [f"{len(counters)} counter-claim(s) in dissent"] if counters else []
    if against:
        parts.append(f"concluded {str(slot.position).upper()} against the majority")
    return _slot_check(slot, "countered", "; ".join(parts))


# The severities a caller must put to a person when no consensus settles them: MUST and
# SHOULD, the CRITICAL and HIGH of the contract's mapping (contracts/council-voice-contract.md).
DECISION_SEVERITIES: frozenset[Severity] = frozenset({"MUST", "SHOULD"})


def unresolved_claims(agreement: Agreement) -> list[DissentEntry]:
    """Dissent at MUST or SHOULD whose claims no consensus entry carries.

    A dissent entry is settled only when every claim it stands for is also in consensus
    (a correlated-wording note about an agreed claim, say); anything else stays open.
    """
    agreed = {i for c in agreement.consensus_claims for i in c.claim_ids}
    return [
        d
        for d in agreement.dissent
        if d.severity in DECISION_SEVERITIES and not (d.claim_ids and set(d.claim_ids) <= agreed)
    ]


def decision_text(unresolved: list[DissentEntry]) -> str | None:
    """Names every unresolved claim, so the caller can put each one to a person."""
    if not unresolved:
        return None
    items = "; ".join(
        f"({k}) [{d.severity}] {d.claim} ({d.label}, {', '.join(d.voice_ids) or 'council'})"
        for k, d in enumerate(unresolved, start=1)
    )
    noun = "claim" if len(unresolved) == 1 else "claims"
    return f"{len(unresolved)} unresolved MUST/SHOULD {noun} no consensus settles: {items}"


def arbitrate(
    voices: list[Voice], clusters: list[ClaimCluster], near_verbatim: list[NearVerbatim]
) -> Arbitration:
    valid = [v for v in voices if v.status == "complete"]
    by_id = {v.id: v for v in voices}
    claims = {c.id: c for v in valid for c in v.claims}
    stamp, families = decorrelation_of(valid)

    consensus: list[ConsensusClaim] = []
    dissent: list[DissentEntry] = []
    for cluster in clusters:
        members = [claims[i] for i in cluster.claim_ids]
        text = members[0].text
        severity = _strongest(members)
        wordings = (
            [made(ClaimWording, claim_id=c.id, voice_id=c.voice_id, text=c.text) for c in members]
            if len(members) > 1
            else []
        )
        if len(cluster.voice_ids) < 2:
            dissent.append(
                _cluster_dissent(
                    cluster, "single-voice", text, "only one voice made this claim", severity
                )
            )
            continue
        if cluster.conflicting:
            dissent.append(
                _cluster_dissent(
                    cluster,
                    "disagreement",
                    " | ".join(f"{c.voice_id}: {c.text}" for c in members),
                    "voices matched on the same place but say opposite things",
                    severity,
                    wordings,
                )
            )
            continue
        shortfalls = consensus_shortfalls(cluster, members, by_id, stamp)
        if not shortfalls and cluster.matched_by is not None:
            consensus.append(
                ConsensusClaim(
                    claim=text,
                    cluster_id=cluster.id,
                    claim_ids=cluster.claim_ids,
                    voice_ids=cluster.voice_ids,
                    families=cluster.families,
                    matched_by=cluster.matched_by,
                    severity=severity,
                    members=wordings,
                )
            )
        else:
            dissent.append(
                _cluster_dissent(
                    cluster,
                    "unverified",
                    text,
                    "unverified agreement: " + "; ".join(shortfalls),
                    severity,
                    wordings,
                )
            )

    # A split on the question itself is dissent even when no two claims collide.
    positions = {v.id: v.position for v in valid if v.position in ("yes", "no")}
    if len(set(positions.values())) > 1:
        yes = [i for i, p in positions.items() if p == "yes"]
        no = [i for i, p in positions.items() if p == "no"]
        dissent.append(
            made(
                DissentEntry,
                claim=(
                    f"Voices split on the question: YES ({', '.join(yes)}) vs NO ({', '.join(no)})"
                ),
                label="disagreement",
                voice_ids=sorted(positions, key=lambda v: int(v[1:])),
                families=sorted({by_id[i].model_family for i in positions}),
                detail="stances: "
                + "; ".join(f"{by_id[i].id}: {by_id[i].stance}" for i in positions),
            )
        )

    for pair in near_verbatim:
        va, vb = (by_id[i] for i in pair.voice_ids)
        if pair.conflicting:
            continue  # same wording with a different number or negation is a disagreement
        distinct_confirmed = (
            counts_for_family(va) and counts_for_family(vb) and va.model_family != vb.model_family
        )
        detail = (
            "near-verbatim across confirmed-distinct families: either genuine convergent "
            "reasoning or a sign the family labels do not reflect the actual backends"
            if distinct_confirmed
            else "near-verbatim from the same or an unconfirmed family: treat as one voice"
        )
        dissent.append(
            made(
                DissentEntry,
                claim=claims[pair.claim_ids[0]].text,
                label="correlated-penalty",
                voice_ids=list(pair.voice_ids),
                families=sorted({va.model_family, vb.model_family}),
                claim_ids=list(pair.claim_ids),
                detail=f"{detail} (similarity {pair.score:g})",
            )
        )

    perturbation = _perturbation_check(valid, voices)
    if perturbation.outcome == "framing-sensitive":
        dissent.append(
            made(
                DissentEntry,
                claim="The answer depends on how the question is framed",
                label="framing-sensitive",
                voice_ids=[v for v in [perturbation.voice_id] if v],
                detail=perturbation.detail,
            )
        )
    dissent.extend(_inversion_misses(perturbation, voices, clusters, claims))
    devils = _devils_check(valid, voices, clusters)

    notes: list[str] = []
    if stamp == "NO_DECORRELATION":
        notes.append(
            f"NO_DECORRELATION: {len(families)} distinct confirmed famil"
            f"{'y' if len(families) == 1 else 'ies'} answered; agreement here may be an echo"
        )
    if devils is not None and devils.outcome == "no-counterclaims":
        notes.append("devil's advocate found no substantive counter-claim: the majority held")

    dissent.sort(key=lambda d: (SEVERITY_ORDER[d.severity], d.label))
    agreement = made(Agreement, consensus_claims=consensus, dissent=dissent)
    unresolved = unresolved_claims(agreement)
    return Arbitration(
        decorrelation=stamp,
        distinct_families=families,
        agreement=agreement,
        checks=made(Checks, perturbation=perturbation, devils_advocate=devils),
        needs_decision=bool(unresolved),
        decision=decision_text(unresolved),
        notes=notes,
    )
