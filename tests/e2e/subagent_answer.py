"""A stand-in host subagent for ``rune council --subagent-cmd``: prompt on stdin, answer on stdout.

It restates the question it finds in the prompt and agrees with the anthropic voice of
test_council_real.py that the plan has no rollback step (citing plan.md:6), so a test can
check that a fallback voice never turns a single-family claim into cross-family consensus.
Standard library only: the council runs it with a stripped environment.
"""

from __future__ import annotations

import json
import re
import sys

_QUESTION = re.compile(
    r"^Question:\n(?P<question>.*?)\n\nEvidence rules:", re.DOTALL | re.MULTILINE
)


def main() -> int:
    prompt = sys.stdin.read()
    match = _QUESTION.search(prompt)
    if match is None:
        print("subagent: no question section in the prompt", file=sys.stderr)
        return 3
    answer = {
        "question_echo": match["question"].strip(),
        "stance": "NO, not until someone writes down how to undo the migration.",
        "claims": [
            {
                "text": "Nothing in the plan says how to undo the shard migration if the "
                "cutover fails.",
                "severity": "SHOULD",
                "evidence": [{"ref": "plan.md:6", "quote": "No rollback step is defined."}],
            }
        ],
    }
    print("Subagent answer:\n```json\n" + json.dumps(answer, indent=1) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
