"""What a 5-voice rank council with a 20 KB artifact sends, against the naive way.

Run: .venv/bin/python bench/prompt_cost.py

Five scripted voices of five families answer with about 3 KB each (prose around the JSON
answer, as models write), then rank each other. The run file's ``prompt_cost`` gives what
the council sent, by stage. The naive figure is the same council sending everything to every
stage: each ranker gets the artifact again and every other member's whole reply, where the
council sends only the others' stances and claims (the voices keep no context between calls,
so the artifact does go to each voice once). Figures are printed, never asserted.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rune_council import CouncilOptions, convene  # noqa: E402
from rune_council.council.metering import estimated_tokens  # noqa: E402
from rune_council.testing import ScriptedRuntime, answer_for  # noqa: E402

QUESTION = "Is this migration plan safe to run as written?"
FAMILIES = ("anthropic", "openai", "google", "mistral", "meta")


def artifact(size: int = 20_000) -> str:
    lines = []
    n = 0
    while sum(len(x) + 1 for x in lines) < size:
        n += 1
        lines.append(f"Step {n}: copy rows of orders shard {n % 8} to the new table in batches.")
    return "\n".join(lines)


def member(family: str) -> ScriptedRuntime:
    prose = ("I read the plan step by step and compared it with the schema it changes. " * 40)[
        :2800
    ]

    def reply(prompt: str) -> str:
        if "\nRANK " in prompt and "Answer " in prompt:
            letters = sorted(set(re.findall(r"^Answer ([A-Z]):", prompt, re.M)))
            return "RANK " + ">".join(letters) + " conf=0.6"
        if "Synthesise" in prompt or "chairman" in prompt.lower():
            return "The council finds the plan unsafe without a rollback step."
        return prose + "\n" + answer_for(QUESTION, "NO, not as written")

    return ScriptedRuntime(reply, family=family, name=family)


def main() -> None:
    text = artifact()
    voices = [member(f) for f in FAMILIES]
    with tempfile.TemporaryDirectory(prefix="rune-cost-") as tmp:
        result = convene(
            {
                "id": "cost",
                "question": QUESTION,
                "n": 5,
                "mode": "critique",
                "artifact": {"name": "plan.md", "text": text},
                "deliberation": {"method": "rank"},
            },
            CouncilOptions(runtimes=voices, rune_dir=Path(tmp) / ".rune"),
        )
    cost = result.prompt_cost
    assert cost is not None
    stages: dict[str, int] = {}
    for use in cost.by_use:
        stages[use.stage] = stages.get(use.stage, 0) + use.bytes
    raws = {v.runtime: len((v.raw.text if v.raw else "").encode()) for v in result.voices}
    art = len(text.encode())
    # The naive council: the same answer prompts, then every later prompt carries the
    # artifact and the whole reply of every other member on top of what ours carries.
    naive = stages.get("answer", 0)
    for voice in voices:
        others = sum(raws.values()) - raws.get(voice.name, 0)
        naive += sum(len(p.encode()) + art + others for p in voice.prompts[1:])
    print(f"5-voice rank council, {art / 1000:.1f} KB artifact, ~3 KB replies")
    for stage, size in stages.items():
        print(f"  {stage:<14} {size / 1000:8.1f} KB  ~{estimated_tokens(size):,} tokens")
    print(f"  {'total':<14} {cost.bytes / 1000:8.1f} KB  ~{cost.tokens_est:,} tokens")
    print(
        f"  naive (artifact and whole replies to every stage): {naive / 1000:.1f} KB "
        f"~{estimated_tokens(naive):,} tokens; the council sends {cost.bytes / naive:.0%} of it"
    )


if __name__ == "__main__":
    main()
