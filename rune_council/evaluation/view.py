"""An eval report as text for a person: the arm table, the comparisons, the votes.

Every figure is a value with its interval, or "—" with the reason it is undefined, so a set
a model scored nothing on reads as that, never as a zero it did not earn.
"""

from __future__ import annotations

from .report import ArmCost, EvalReport
from .stats import Rate

DASH = "\u2014"


def rate_text(rate: Rate) -> str:
    if rate.value is None:
        return DASH
    shown = f"{rate.value:.2f} ({rate.numerator}/{rate.denominator})"
    if rate.interval is not None:
        shown += f" [{rate.interval.low:.2f}, {rate.interval.high:.2f}]"
    return shown


def _n(value: float) -> str:
    return f"{value:,.0f}"


def tokens_text(cost: ArmCost) -> str:
    """An arm's tokens per item, saying which figures are reported and which estimated."""
    est = cost.estimated_prompt_tokens_per_item
    guess = f"~{_n(est)} prompt tokens est." if est is not None else None
    reported = cost.reported_tokens_per_item
    if cost.tokens == "reported" and reported is not None:
        return (
            f"{_n(reported)} tokens reported ({_n(cost.reported_prompt_tokens_per_item or 0)} "
            f"prompt + {_n(cost.reported_completion_tokens_per_item or 0)} completion; "
            f"reported by {cost.reported_calls} of {cost.calls} calls)"
        )
    if cost.tokens == "partly reported" and reported is not None:
        also = f", {guess} for all calls" if guess else ""
        return (
            f"{_n(reported)} tokens reported by {cost.reported_calls} of {cost.calls} calls{also}"
        )
    if guess is not None:
        return f"{guess} (no call reported tokens)"
    return f"tokens {DASH} (none reported, no prompt size recorded)"


def _reasons(name: str, rates: dict[str, Rate]) -> list[str]:
    return [
        f"  {name} {what}: {DASH} {r.reason}"
        for what, r in rates.items()
        if r.value is None and r.reason
    ]


def render(report: EvalReport) -> str:
    level = round(report.level * 100)
    out = [
        f"eval: {report.items} item(s), {report.flawed} flawed, {report.clean} clean; a claim "
        f"hits within {report.hit_distance} lines of a seeded line; intervals {level}% "
        f"bootstrap over items ({report.resamples} resamples, seed {report.seed})",
        "",
    ]
    rows = [("arm", "answered", "recall", "false alarm", "precision")]
    reasons: list[str] = []
    for arm in report.arms:
        rows.append(
            (
                arm.name,
                f"{arm.answered}/{arm.answered + arm.unanswered}",
                rate_text(arm.recall),
                rate_text(arm.false_alarm),
                rate_text(arm.precision),
            )
        )
        reasons += _reasons(
            arm.name,
            {"recall": arm.recall, "false alarm": arm.false_alarm, "precision": arm.precision},
        )
        reasons += [f"  {arm.name}: {note}" for note in arm.notes]
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for row in rows:
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if reasons:
        out += ["", "why a figure is missing, and notes:", *reasons]
    out += ["", "against the best single voice (McNemar, Holm-adjusted):"]
    if not report.comparisons:
        out.append(f"  {DASH} no pooled arm to compare")
    for c in report.comparisons:
        note = f"; {c.test.note}" if c.test.note else ""
        out.append(
            f"  {c.arm} vs {c.against}: {c.items} item(s), right only here {c.test.a_only}, "
            f"only there {c.test.b_only}, p={c.test.p_value:.3g}, Holm p={c.holm_p:.3g}{note}"
        )
    if report.costs:
        out += [
            "",
            "cost per item (calls; tokens; wall time). Tokens 'reported' are the endpoint's "
            "own count; '~ est.' is prompt tokens estimated from prompt size (bytes / 4), "
            "for calls that report none (CLI voices, ballots):",
        ]
    for cost in report.costs:
        calls = f"{cost.calls_per_item:.1f}" if cost.calls_per_item is not None else DASH
        took = f"{cost.seconds_per_item:.2f} s" if cost.seconds_per_item is not None else DASH
        why = f" ({cost.reason})" if cost.reason else ""
        out.append(
            f"  {cost.arm}: {calls} call(s); {tokens_text(cost)}; {took}{why} "
            f"over {cost.items} item(s)"
        )
    votes = report.effective_votes
    out += ["", "decorrelation:"]
    if votes.value is None:
        out.append(f"  effective independent votes: {DASH} {votes.reason or 'undefined'}")
    else:
        interval = (
            f" [{votes.interval.low:.2f}, {votes.interval.high:.2f}]" if votes.interval else ""
        )
        mean = (
            f", mean error correlation {votes.mean_correlation:.2f}"
            if votes.mean_correlation is not None
            else ""
        )
        out.append(
            f"  effective independent votes: {votes.value:.2f}{interval} of "
            f"{len(votes.voices)} voice(s){mean}"
        )
    for why_voice, why in votes.excluded.items():
        out.append(f"  left out of the votes: {why_voice}: {why}")
    for pair in report.voice_agreement:
        if pair.joint_error_rate is None:
            out.append(f"  {pair.a} & {pair.b}: {DASH} {pair.reason or 'undefined'}")
            continue
        independent = f"{pair.independent_rate:.2f}" if pair.independent_rate is not None else DASH
        out.append(
            f"  {pair.a} & {pair.b}: wrong together {pair.both_wrong}/{pair.items} "
            f"({pair.joint_error_rate:.2f}; independence predicts {independent})"
        )
    for fam in report.family_agreement:
        if fam.joint_error_rate is None:
            out.append(f"  families {fam.a} & {fam.b}: {DASH} {fam.reason or 'undefined'}")
            continue
        independent = f"{fam.independent_rate:.2f}" if fam.independent_rate is not None else DASH
        out.append(
            f"  families {fam.a} & {fam.b}: wrong together {fam.joint_error_rate:.2f} "
            f"(independence predicts {independent}) over {fam.voice_pairs} voice pair(s)"
        )
    if report.notes:
        out += ["", *[f"note: {n}" for n in report.notes]]
    return "\n".join(out) + "\n"


__all__ = ["rate_text", "render", "tokens_text"]
