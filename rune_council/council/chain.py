"""Chains of councils: named templates run in order, each told what the ones before found.

A chain (``[chains.NAME] steps = ["red-team", "architecture-review"]`` in council.toml, or a
shipped one such as ``red-team-first``) runs one ordinary council per step, each with its
own run file. Every step's run id is planned before the first starts: the last step takes
the caller's id, each earlier one ``<id>.<template>``. Each run file records the whole plan
(``request.chain``), so any of them leads to the others. From the second step on, every
voice is given the verdicts of the steps before it: the risk register, what the council
agreed on, and what it left open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.contract import (
    ChainPosition,
    ChainRun,
    CouncilResult,
    DeliberationOptions,
    PerspectiveRequest,
    is_safe_run_id,
)
from ..core.errors import RequestError
from .lifecycle import run_blocking
from .options import CouncilOptions
from .pipeline import aconvene
from .request import parse_request
from .templates import (
    Template,
    apply_template,
    caller_settings,
    config_for,
    find_chain,
    find_template,
)

DEFAULT_CHAIN = "red-team-first"
MAX_ID = 128
# The context field holds at most 60,000 characters; each earlier step gets a fair share.
CONTEXT_CAP = 60_000
PART_CAP = 4_000


def step_ids(run_id: str, templates: list[str]) -> list[str]:
    """The run id of every step: the caller's for the last, ``<id>.<template>`` before it
    (``<id>.<template>-<k>`` when a template comes back)."""
    ids: list[str] = []
    for index, name in enumerate(templates[:-1]):
        tag = name if templates.count(name) == 1 else f"{name}-{index + 1}"
        suffix = f".{tag}"
        # A trailing dot would make ".." with the suffix, which run ids refuse.
        ids.append(run_id[: MAX_ID - len(suffix)].rstrip(".") + suffix)
    ids.append(run_id)
    bad = [i for i in ids if not is_safe_run_id(i)]
    if bad:
        raise RequestError(f"chain step run id {bad[0]!r} is not a safe file name")
    return ids


def _bounded(text: str, cap: int = PART_CAP) -> str:
    # The context is fenced with fixed CONTEXT delimiters in every prompt; what voices wrote
    # must not be able to close that fence early.
    text = text.replace("<<<", "< < <").replace(">>>", "> > >")
    return text if len(text) <= cap else text[:cap] + " [cut]"


def verdict_as_context(result: CouncilResult) -> str:
    """What one finished step tells the next: stamp, verdict, risk register, consensus and
    open questions. Everything here was written by voices or a chairman: data, bounded."""
    template = result.request.template
    named = f" ({template.name})" if template is not None else ""
    lines = [
        f"Council {result.id}{named}: {result.status}, "
        f"{result.decorrelation or 'no decorrelation stamp'}, "
        f"{result.voices_valid} valid voice(s)."
    ]
    d = result.deliberation
    if d is not None and d.synthesis is not None:
        lines.append(f"Verdict: {_bounded(d.synthesis.text)}")
    if d is not None and d.risk_register is not None:
        from ..deliberation.redteam import register_as_context

        lines.append(_bounded(register_as_context(d.risk_register, result.id), 3 * PART_CAP))
    consensus = result.agreement.consensus_claims
    if consensus:
        lines.append("Consensus (verified, cross-family):")
        lines += [f"- {_bounded(c.claim)} ({', '.join(c.families)})" for c in consensus]
    # Loaded here, where a chain's step has its verdict: a single pass loads it only to judge.
    from ..stages.arbitrate import unresolved_claims

    open_items: list[str] = []
    if d is not None and d.synthesis is not None:
        open_items += [_bounded(q) for q in d.synthesis.open_questions]
    open_items += [
        f"[{e.severity}] {_bounded(e.claim)} ({e.label})"
        for e in unresolved_claims(result.agreement)
    ]
    if open_items:
        lines.append("Open questions:")
        lines += [f"- {item}" for item in open_items]
    elif not consensus and (d is None or d.risk_register is None):
        lines.append("It reached no consensus and left nothing open.")
    return "\n".join(lines)


def chain_context(results: list[CouncilResult]) -> str:
    share = CONTEXT_CAP // max(1, len(results)) - 100
    parts = [verdict_as_context(r)[:share] for r in results]
    return "\n\n".join(parts)


def _step_request(
    given: Mapping[str, Any],
    template: Template,
    run_id: str,
    position: ChainPosition,
    earlier: list[CouncilResult],
) -> PerspectiveRequest:
    # Each step runs its template as written; the caller's request fills what it leaves open.
    req = apply_template({**given, "id": run_id}, template, template_wins=True)
    update: dict[str, Any] = {"chain": position}
    if earlier:
        base = req.deliberation or DeliberationOptions()
        previous = earlier[-1]
        red_before = (
            previous.request.deliberation is not None
            and previous.request.deliberation.council_type == "red_team"
        )
        update["deliberation"] = base.model_copy(
            update={
                "context": chain_context(earlier),
                "chained_from": previous.id if red_before else None,
            }
        )
    return req.model_copy(update=update)


async def aconvene_chain(
    request: PerspectiveRequest | Mapping[str, Any],
    options: CouncilOptions | None = None,
    chain: str = DEFAULT_CHAIN,
) -> CouncilResult:
    """Run the chain's councils in order; returns the last step's result.

    ``chain`` names a chain (``rune council templates`` lists them); the default is a red
    team followed by a standard council that weighs its risk register.
    """
    opts = options or CouncilOptions()
    if opts.template is not None:
        raise RequestError("a chain's steps are templates already: give a chain or a template")
    config = config_for(opts)
    found = find_chain(chain, config)
    steps = [find_template(name, config) for name in found.spec.steps]
    first = parse_request(request)
    given = caller_settings(request)
    ids = step_ids(first.id, found.spec.steps)
    plan = [ChainRun(template=t.name, run_id=i) for t, i in zip(steps, ids, strict=True)]
    results: list[CouncilResult] = []
    for number, (template, run_id) in enumerate(zip(steps, ids, strict=True), start=1):
        position = ChainPosition(name=found.name, step=number, runs=plan)
        step = _step_request(given, template, run_id, position, results)
        results.append(await aconvene(step, opts))
    return results[-1]


def convene_chain(
    request: PerspectiveRequest | Mapping[str, Any],
    options: CouncilOptions | None = None,
    chain: str = DEFAULT_CHAIN,
) -> CouncilResult:
    """Blocking form of :func:`aconvene_chain`."""
    return run_blocking(lambda: aconvene_chain(request, options, chain))
