"""The skill's Output Format, rendered from a CouncilResult (decorrelation first)."""

from __future__ import annotations

from .contract import CouncilResult
from .safetext import plain


def render(result: CouncilResult, *, status: tuple[str, str] | None = None) -> str:
    """``status``: (status, why) to show instead of the file's own, e.g. abandoned."""
    shown, why = status or (result.status, "")
    dropped = len(result.voices_dropped)
    detected = sorted(
        {d.model_family for d in result.runtime_report.detected if d.status == "available"}
    )
    used = result.runtime_report.used
    degraded = len(result.runtime_report.degraded_to_subagent)
    stamp = result.decorrelation or f"(none: run {shown})"
    lines = [
        f"## Council Result: {result.id}",
        f"- **Decorrelation**: {stamp}"
        + (f" ({', '.join(result.distinct_families)})" if result.distinct_families else ""),
        f"- **Question**: {result.question}",
        f"- **Mode**: {result.mode}",
        f"- **Voices**: {result.voices_valid}/{result.voices_requested} valid ({dropped} dropped)",
        f"- **Runtime**: {', '.join(detected) or 'none detected'} → "
        f"{', '.join(used) or 'none'} (degraded: {degraded})",
    ]
    if shown != "complete":
        lines.append(f"- **Status**: {shown}" + (f" ({why})" if why else ""))
    for voice in result.voices:
        tag = " fallback" if voice.is_fallback else ""
        role = "" if voice.slot_role == "standard" else f" [{voice.slot_role}]"
        state: str = voice.status
        if voice.status == "dropped":
            state = f"dropped: {voice.drop_reason}"
        elif voice.stance:
            state = voice.stance
        lines.append(f"  - {voice.id} {voice.runtime} ({voice.model_family}{tag}){role}: {state}")

    lines += ["", "### Consensus (verified, cross-family)"]
    if result.decorrelation != "MULTI_FAMILY":
        lines.append("- none: fewer than two distinct confirmed model families answered")
    elif not result.agreement.consensus_claims:
        lines.append("- none")
    for c in result.agreement.consensus_claims:
        lines.append(
            f"- {c.claim} — voices: {', '.join(c.voice_ids)}, families: {', '.join(c.families)}"
            f" (matched by {c.matched_by.method}: {c.matched_by.key})"
        )
        lines += [f"  - {m.voice_id}: {m.text}" for m in c.members]

    lines += ["", "### Dissent"]
    if not result.agreement.dissent:
        lines.append("- none")
    for d in result.agreement.dissent:
        sev = f"[{d.severity}] " if d.severity else ""
        lines.append(f"- {sev}{d.claim} — {', '.join(d.voice_ids) or 'council'} — {d.label}")
        if d.detail:
            lines.append(f"  - {d.detail}")
        if d.label != "disagreement":  # a disagreement's claim already quotes each member
            lines += [f"  - {m.voice_id}: {m.text}" for m in d.members]

    lines += ["", "### Needs Decision"]
    lines.append(result.decision if result.needs_decision and result.decision else "- no")

    checks = result.checks
    if checks.perturbation or checks.devils_advocate:
        lines += ["", "### Checks"]
        if checks.perturbation:
            lines.append(
                f"- perturbation: {checks.perturbation.outcome} — {checks.perturbation.detail}"
            )
        if checks.devils_advocate:
            da = checks.devils_advocate
            lines.append(f"- devil's advocate: {da.outcome} — {da.detail}")
    if result.notes:
        lines += ["", "### Notes"] + [f"- {n}" for n in result.notes]
    if result.run_file:
        lines += ["", f"Run file: {result.run_file}"]
    # Questions, stances, claims and reasons are what voices wrote: text, never escapes.
    return plain("\n".join(lines) + "\n")
