"""Precision and recall of the on-topic gate on a labelled set of (question, echo) pairs.

    python bench/topic_gate.py [--show]      (--show: print every pair the gate gets wrong)

Positive = the gate keeps the voice (on-topic). The set (bench/data/topic_pairs.json) holds
faithful paraphrases, inverted framings of the kind the perturbation slot writes, and echoes
of look-alike questions. The labelled set was used to settle the rule; the second set was
written afterwards (its "about" says what changed after its first measurement).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rune_council.stages.topic import topic_match

HERE = Path(__file__).resolve().parent / "data"
SETS = {
    "labelled set": HERE / "topic_pairs.json",
    "held-out set": HERE / "topic_pairs_heldout.json",
}


def measure(name: str, path: Path) -> tuple[float, float]:
    pairs = json.loads(path.read_text(encoding="utf-8"))["pairs"]
    tp = fp = fn = tn = 0
    for p in pairs:
        m = topic_match(p["echo"], p["q"])
        kept = m.on_topic()
        if kept and p["on_topic"]:
            tp += 1
        elif kept:
            fp += 1
        elif p["on_topic"]:
            fn += 1
        else:
            tn += 1
        if "--show" in sys.argv and kept != p["on_topic"]:
            print(f"WRONG {p['kind']:10} {m.score:.2f} {p['echo']!r} | {m.explain()}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(
        f"on-topic gate, {name}: {len(pairs)} pairs (tp {tp} fp {fp} fn {fn} tn {tn}) "
        f"precision {precision:.3f} recall {recall:.3f}"
    )
    return precision, recall


def main() -> None:
    for name, path in SETS.items():
        measure(name, path)


if __name__ == "__main__":
    main()
