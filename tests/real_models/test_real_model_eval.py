"""A tiny `rune council eval` answered by the two real small models: it completes, and the
report is whole and honest whatever they score (a 135M model may catch nothing: every rate is
then a value or null with its reason, never a crash or a division by zero)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.config import user_config_dir
from rune_council.evaluation.report import EvalReport
from tests.real_models.serving import RealModelServer
from tests.real_models.test_real_model_council import server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.real_models

# Enough for one short answer; each token costs a busy two-core machine 50-100 ms.
ANSWER_TOKENS = 512

SOURCE = (
    "def clamp(value, low, high):\n"
    '    """Return value limited to the closed range from low to high."""\n'
    "    if value < low:\n"
    "        return low\n"
    "    if value > high:\n"
    "        return high\n"
    "    return value\n"
)
FLAWED = SOURCE.replace("if value > high:", "if value >= high + 1:")


def dataset(tmp: Path) -> Path:
    items = [
        {
            "id": "clamp-flawed",
            "label": "flawed",
            "path": "clamp.py",
            "pre_image": "",
            "post_image": FLAWED,
            "seeded": [{"path": "clamp.py", "line": 5}],
        },
        {
            "id": "clamp-clean",
            "label": "clean",
            "path": "clamp.py",
            "pre_image": "",
            "post_image": SOURCE,
        },
    ]
    path = tmp / "tiny.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def test_a_two_item_eval_completes_with_an_honest_report(
    server: RealModelServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    config = user_config_dir(env)
    config.mkdir(parents=True)
    (config / "council.toml").write_text(
        # Whole replies: the server reports usage in them, which is what the cost reads.
        f'[endpoints.local]\nbase_url = "{server.base_url}"\nmax_tokens = {ANSWER_TOKENS}\n'
        "stream = false\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            "eval",
            str(dataset(tmp_path)),
            "--endpoint",
            "local",
            "--n",
            "2",
            "--timeout",
            "240",
            "-c",
            "1",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    assert (report.items, report.flawed, report.clean) == (2, 1, 1)
    kinds = {a.kind for a in report.arms}
    assert {"best-voice", "majority", "consensus", "consensus+dissent"} <= kinds
    for arm in report.arms:
        for rate in (arm.recall, arm.false_alarm, arm.precision):
            if rate.value is None:
                assert rate.reason, (arm.name, rate)
            else:
                assert 0.0 <= rate.value <= 1.0
                assert rate.denominator > 0
    votes = report.effective_votes
    assert votes.value is not None or votes.reason
    # Each voice's tokens are the server's own counts, over the calls it answered.
    voice_costs = [c for c in report.costs if c.arm.startswith("voice:")]
    assert len(voice_costs) == 2
    for cost in voice_costs:
        assert cost.tokens in ("reported", "partly reported"), cost
        assert cost.reported_calls >= 1
        assert (cost.reported_prompt_tokens_per_item or 0) > 0
        assert (cost.estimated_prompt_tokens_per_item or 0) > 0
    # Every item's council ran and left its run file.
    for item in ("clamp-flawed", "clamp-clean"):
        assert len(list((tmp_path / ".rune" / "council").glob(f"run-eval-*-{item}.json"))) == 1
