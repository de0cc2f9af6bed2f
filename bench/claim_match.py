"""Precision and recall of NORMALIZE's same-point test on claims that share a place.

    python bench/claim_match.py [--show]      (--show: print every pair it gets wrong)

Each pair in bench/data/claim_pairs.json is two claims by two voices citing the same line
of plan.md with the same quote; the second set (claim_pairs_heldout.json, another
artifact) was written after the rule was settled and not used to tune it. Positive = the
two are merged into one claim. They go through the real NORMALIZE (gate, evidence check,
clustering), not through a shortcut.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice
from rune_council.stages.gate import gate
from rune_council.stages.normalize import normalize

DATA = Path(__file__).resolve().parent / "data" / "claim_pairs.json"
HELD_OUT = DATA.with_name("claim_pairs_heldout.json")
QUESTION = "Is the orders sharding plan in plan.md safe to execute as written?"


def _voice(vid: str, family: str, text: str, ref: str, quote: str) -> Voice:
    body = {
        "question_echo": QUESTION,
        "stance": "NO",
        "claims": [{"text": text, "evidence": [{"ref": ref, "quote": quote}]}],
    }
    voice = Voice(
        id=vid,
        source="external-cli",
        runtime=f"{family}-cli",
        model_family=family,
        family_confidence="confirmed",
        status="complete",
        raw=RawOutput(text=json.dumps(body)),
    )
    assert gate(voice, PerspectiveRequest(id="bench", question=QUESTION)) is None
    return voice


def merged(pair: dict[str, object], name: str, artifact: str) -> bool:
    ref, quote = str(pair["ref"]), str(pair["quote"])
    voices = [
        _voice("v1", "anthropic", str(pair["a"]), ref, quote),
        _voice("v2", "openai", str(pair["b"]), ref, quote),
    ]
    clusters = normalize(voices, name, artifact).clusters
    return len(clusters) == 1


def measure(name: str, path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    tp = fp = fn = tn = 0
    for pair in data["pairs"]:
        got = merged(pair, data["artifact_name"], data["artifact"])
        want = pair["same_point"]
        tp += got and want
        fp += got and not want
        fn += (not got) and want
        tn += (not got) and not want
        if "--show" in sys.argv and got != want:
            print(f"WRONG want {want}: {pair['a']!r} / {pair['b']!r}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(
        f"same-point test, {name}: {len(data['pairs'])} pairs at shared places "
        f"(tp {tp} fp {fp} fn {fn} tn {tn}) precision {precision:.3f} recall {recall:.3f}"
    )


def main() -> None:
    measure("labelled set", DATA)
    measure("second set", HELD_OUT)


if __name__ == "__main__":
    main()
