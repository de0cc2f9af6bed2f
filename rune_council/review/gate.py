"""The CI gate: what the council found on a change, as a pass or a failure of its own.

``--fail-on`` names how much it takes to fail, each level failing on everything the next
one fails on and more:

- ``must``: a finding the council agreed on (consensus) at MUST;
- ``consensus``: a finding agreed on at MUST or SHOULD;
- ``needs-decision`` (the default): either of those, or a MUST/SHOULD claim that no
  consensus settles, which the council says needs a person's decision;
- ``never``: report only.

A MAY finding never fails the gate. A council with no valid voice reached no verdict: that
is ``NO_VERDICT``, whatever the gate, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..core.contract import CouncilResult
from ..core.errors import ExitCode, GateFailed, exit_code_for
from ..stages.arbitrate import DECISION_SEVERITIES
from .findings import Finding, Findings, decides

FailOn = Literal["needs-decision", "consensus", "must", "never"]
FAIL_ON: tuple[str, ...] = get_args(FailOn)
DEFAULT_FAIL_ON: FailOn = "needs-decision"


@dataclass(frozen=True)
class GateOutcome:
    fail_on: FailOn
    verdict: Literal["pass", "fail", "no-verdict"]
    reason: str
    failing: tuple[Finding, ...] = ()

    @property
    def code(self) -> ExitCode:
        if self.verdict == "no-verdict":
            return ExitCode.NO_VERDICT
        if self.verdict == "fail":
            return exit_code_for(GateFailed())
        return ExitCode.OK


def _agreed(f: Finding, severities: frozenset[str]) -> bool:
    return f.kind == "consensus" and f.level != "note" and f.severity in severities


def judge(result: CouncilResult | None, findings: Findings, fail_on: FailOn) -> GateOutcome:
    """The gate's verdict; ``result`` None: there was no change, so nothing to fail on."""
    if result is not None and result.voices_valid == 0:
        return GateOutcome(
            fail_on, "no-verdict", "no verdict: no voice gave a usable answer (exit 1)"
        )
    if fail_on == "never":
        return GateOutcome(fail_on, "pass", "--fail-on never: findings are reported only")
    if fail_on == "must":
        failing = [f for f in findings.findings if _agreed(f, frozenset({"MUST"}))]
        what = "agreed at MUST"
    elif fail_on == "consensus":
        failing = [f for f in findings.findings if _agreed(f, DECISION_SEVERITIES)]
        what = "agreed at MUST or SHOULD"
    else:
        failing = [f for f in findings.findings if _agreed(f, DECISION_SEVERITIES) or decides(f)]
        what = "agreed at MUST or SHOULD, or needing a decision"
        if not failing and result is not None and result.needs_decision:
            return GateOutcome(fail_on, "fail", "the council says this needs a decision")
    if failing:
        noun = "finding" if len(failing) == 1 else "findings"
        return GateOutcome(fail_on, "fail", f"{len(failing)} {noun} {what}", tuple(failing))
    return GateOutcome(fail_on, "pass", f"no finding {what}")


__all__ = ["DEFAULT_FAIL_ON", "FAIL_ON", "FailOn", "GateOutcome", "judge"]
