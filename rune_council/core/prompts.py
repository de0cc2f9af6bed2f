"""The self-contained prompt each voice receives.

External voices share no conversation with the caller, so everything they need travels in
the prompt: the question, the mode, the framing of their slot, the evidence rules, the
artifact with line numbers, and the exact answer shape GATE will parse.
"""

from __future__ import annotations

import functools

from .contract import PerspectiveRequest, SlotRole

ARTIFACT_CHAR_CAP = 60_000

_MODE_TASK = {
    "critique": "Critique the artifact or plan: find what is wrong, risky or missing.",
    "review": "Review the artifact for defects: bugs, regressions, unsafe behaviour.",
    "judge": "Judge the question on its merits and say which way you come down and why.",
    "generate": "Generate an answer.",
}

_ROLE_FRAMING: dict[SlotRole, str] = {
    "standard": "Answer the question as asked, from your own independent reading.",
    "perturbation": (
        "Start from the opposite position to the one the question invites: assume the "
        "obvious answer is wrong and look for the strongest case against it. Conclude "
        "honestly: if the evidence still supports the obvious answer, say so."
    ),
    "devils_advocate": (
        "You are the devil's advocate. Other voices answer this question independently; "
        "assume a majority will form around the most obvious answer and argue against it "
        "with concrete counter-claims. If after a genuine attempt you find no substantive "
        "counter-claim, return an empty claims list and say so in the stance."
    ),
}

ANSWER_SHAPE = """\
Reply with exactly one JSON object (you may wrap it in a ```json fence) and nothing else:
{
  "question_echo": "<the question you answered, restated in one sentence>",
  "stance": "<begin with YES, NO or MIXED, then one sentence of your position>",
  "claims": [
    {
      "text": "<one specific, checkable claim>",
      "anchor": "<optional: file:line, plan step id or symbol the claim is about>",
      "severity": "<optional: MUST | SHOULD | MAY, as in RFC 2119>",
      "evidence": [{"ref": "<file:line or symbol>", "quote": "<exact words from there>"}]
    }
  ]
}"""


# One council numbers its artifact for every voice's prompt, and every round's: the last one
# numbered is kept (a 1 MB artifact takes some milliseconds, and this many copies of it).
@functools.lru_cache(maxsize=1)
def numbered_artifact(name: str, text: str, cap: int = ARTIFACT_CHAR_CAP) -> str:
    """The artifact with a line-number gutter, capped with a visible marker."""
    shown = text
    marker = ""
    if len(text) > cap:
        shown = text[:cap]
        cut = shown.rfind("\n")
        if cut > cap // 2:
            shown = shown[:cut]
        marker = f"\n[truncated: {len(shown)} of {len(text)} characters of {name} shown]"
    lines = shown.splitlines()
    width = len(str(len(lines)))
    body = "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start=1))
    return body + marker


def compose_prompt(
    request: PerspectiveRequest,
    role: SlotRole,
    persona: str | None,
    artifact_text: str | None,
    focus: str | None = None,
) -> str:
    """``focus`` is the slot's own framing (a template's); it joins the role's, which stays
    so the reserved slots keep doing what ARBITRATE checks them for."""
    parts = [
        "You are one independent voice on a council. You have no earlier conversation "
        "with anyone: everything you need is below. Do not run tools, edit files or "
        "browse; answer from the material given.",
        f"Mode: {request.mode}. {_MODE_TASK[request.mode]}",
        f"Your framing: {_ROLE_FRAMING[role]}",
    ]
    if focus:
        parts.append(f"Your focus: {focus}")
    if persona:
        parts.append(f"Your persona: {persona}")
    if request.preamble:
        parts.append(f"Setting of this council:\n{request.preamble}")
    parts.append(f"Question:\n{request.question}")
    rules = []
    if request.evidence.require_evidence:
        rules.append(
            "Support every claim with evidence: ref names the place (for the artifact use "
            f"{request.artifact.name if request.artifact else 'the file name'}:LINE), quote "
            "copies the exact words from there, without the line-number gutter."
        )
    if request.evidence.require_anchor:
        rules.append("Give every claim an anchor: file:line, plan step id or symbol.")
    rules.append("Claims you cannot support with a quote may be made, but say less, not more.")
    parts.append("Evidence rules:\n- " + "\n- ".join(rules))
    if request.artifact is not None and artifact_text is not None:
        name = request.artifact.name
        if request.artifact_kind:
            parts.append(f"The artifact is expected to be {request.artifact_kind}.")
        parts.append(
            f"Artifact {name} (line numbers in the gutter are not part of the text):\n"
            f"<<<ARTIFACT {name}\n{numbered_artifact(name, artifact_text)}\nARTIFACT {name}>>>"
        )
    parts.append(ANSWER_SHAPE)
    return "\n\n".join(parts) + "\n"
