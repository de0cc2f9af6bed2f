"""The deliberation sections of the council's text output."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.contract import CouncilResult, MemberBallot
from ..core.safetext import one_line, plain


def render_deliberation(result: CouncilResult) -> str:
    """Text after the single-pass report; empty when the run had no deliberation."""
    d = result.deliberation
    lines: list[str] = []
    if d is not None and d.method is not None:
        lines += ["", f"### Deliberation ({d.method}, {d.council_type})"]
        if d.chain is not None:
            lines.append(f"- informed by red-team council {d.chain.red_team_run}")
        if d.consolidation is not None:
            c = d.consolidation
            how = (
                f"deterministic merge ({c.fallback_reason})" if c.fallback else f"merged by {c.by}"
            )
            lines.append(f"- consolidated into {len(c.items)} item(s): {how}")
        if d.vote is not None:
            v = d.vote
            need = v.items[0].required if v.items else 0
            lines.append(
                f"- vote: {v.denominator} ballot(s) counted, {need} yes needed "
                f"(threshold {v.threshold:g})"
            )
            for i in v.items:
                lines.append(
                    f"  - {i.number}. {i.outcome.upper()} {len(i.yes)} yes / {len(i.no)} no / "
                    f"{len(i.abstain)} abstain: {i.text}"
                )
            for a in v.absent:
                lines.append(f"  - absent {a.voice_id} ({a.stage}): {a.reason}")
            lines += _dropped_lines(v.ballots)
        if d.rank is not None:
            t = d.rank.tally
            order = " > ".join("=".join(level) for level in t.final_order) or "-"
            lines.append(f"- rank: {len(t.rankers)} ballot(s), order {order}")
            by_label = {p.label: p.voice_id for p in d.rank.proposals}
            for score in t.scores:
                flag = " [blocked]" if score.blocked else ""
                who = by_label.get(score.label, "?")
                lines.append(f"  - {score.label} ({who}): {score.score:g}{flag}")
            for a in d.rank.absent:
                lines.append(f"  - absent {a.voice_id} ({a.stage}): {a.reason}")
            lines += _dropped_lines(d.rank.ballots)
        if d.risk_register is not None:
            r = d.risk_register
            mark = " (built from the arithmetic)" if r.fallback else ""
            lines += ["", f"### Risk register{mark}", *_fallback_line(r.fallback_reason), r.summary]
            for risk in r.risks:
                by = ", ".join(risk.identified_by) or "-"
                mitigation = f" — mitigation: {risk.mitigation}" if risk.mitigation else ""
                lines.append(
                    f"- [{risk.severity}/{risk.likelihood}] {risk.category}: {risk.description} "
                    f"({by}){mitigation}"
                )
        elif d.synthesis is not None:
            s = d.synthesis
            mark = " (built from the arithmetic)" if s.fallback else f" (by {s.by})"
            why = _fallback_line(s.fallback_reason) if s.fallback else []
            lines += ["", f"### Verdict{mark}", *why, s.text]
            if s.open_questions:
                lines.append("- open: " + "; ".join(s.open_questions))
        if len(d.rounds) > 1 or d.converged_early:
            scores = ", ".join(
                f"{r.round}: {'-' if r.consensus_score is None else f'{r.consensus_score:g}'}"
                for r in d.rounds
            )
            lines.append(f"- rounds (consensus): {scores}")
        lines += [f"- {n}" for n in d.notes]
    m = result.verdict
    if m is not None:
        shown = "n/a" if m.consensus_score is None else f"{m.consensus_score:g}"
        parts = [
            f"consensus {shown} ({m.confidence_label or 'no rankings'})",
            f"dissent {'yes' if m.dissent_detected else 'no'}"
            + (f" by {m.dissent_basis}" if m.dissent_detected and m.dissent_basis else "")
            + (f" ({', '.join(m.dissenting_members)})" if m.dissenting_members else ""),
            f"rounds {m.revision_count}" + (" (converged early)" if m.converged_early else ""),
            f"members {m.member_count}",
            f"{m.council_type}",
        ]
        if m.divergence_detected:
            parts.append("DIVERGED")
        if m.duration_seconds is not None:
            parts.append(f"{m.duration_seconds:g} s")
        lines += ["", "### Verdict metadata", "- " + ", ".join(parts)]
        lines += [f"- [UNCERTAIN] {u.text}" for u in m.uncertainty_markers]
    return plain("\n".join(lines) + ("\n" if lines else ""))


# Per ballot on one line each: a model's reply of many lines is listed in the run file whole.
DROPPED_SHOWN = 5


def _dropped_lines(ballots: Sequence[MemberBallot]) -> list[str]:
    """Each ballot's lines that were not counted, with why, under its member."""
    out = []
    for b in ballots:
        if not b.dropped_lines:
            continue
        parts = [
            f"line {x.line} {one_line(x.text, 80)!r}: {x.reason}"
            for x in b.dropped_lines[:DROPPED_SHOWN]
        ]
        more = len(b.dropped_lines) - DROPPED_SHOWN
        if more > 0:
            parts.append(f"{more} more in the run file")
        said = f"{len(b.dropped_lines)} line(s) not counted: " + "; ".join(parts)
        out.append(f"  - {b.voice_id}: {one_line(said, 800)}")
    return out


def _fallback_line(reason: str | None) -> list[str]:
    """Why no chairman wrote the section: none configured, it failed, or its reply was no
    synthesis of the council's items."""
    return [f"- no chairman's text: {one_line(reason, 600)}"] if reason else []
