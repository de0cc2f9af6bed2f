"""A stand-in for the ``1devtool-agent`` bridge, run as a real subprocess in tests.

    1devtool-agent --version
    1devtool-agent list --json                              prints FAKE_BRIDGE_AGENTS (JSON)
    1devtool-agent run --to=AGENT --prompt-stdin --json     answers FAKE_BRIDGE_ANSWER_<AGENT>

``run`` reads the whole prompt from stdin, appends ``{"argv": [...], "stdin": "..."}`` to
FAKE_BRIDGE_LOG, and prints ``{"agent": AGENT, "output": ANSWER}``; with
FAKE_BRIDGE_FAIL=AGENT it prints ``{"agent": AGENT, "error": "..."}`` and exits 0, as a
bridge that reports an agent's failure in its JSON would. Standard library only.
"""

import json
import os
import sys


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print("1devtool-agent 0.9.1")
        return 0
    if args[:2] == ["list", "--json"]:
        print(os.environ.get("FAKE_BRIDGE_AGENTS", "[]"))
        return 0
    if args[:1] == ["run"] and "--prompt-stdin" in args and "--json" in args:
        agent = next((a.split("=", 1)[1] for a in args if a.startswith("--to=")), "")
        prompt = sys.stdin.read()
        log = os.environ.get("FAKE_BRIDGE_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"argv": args, "stdin": prompt, "env": sorted(os.environ)}))
                fh.write("\n")
        if os.environ.get("FAKE_BRIDGE_FAIL") == agent:
            print(json.dumps({"agent": agent, "error": f"{agent} is not logged in"}))
            return 0
        path = os.environ.get(f"FAKE_BRIDGE_ANSWER_{agent.upper()}", "")
        answer = f"{agent} says hello"
        if path:
            with open(path, encoding="utf-8") as fh:
                answer = fh.read()
        print(json.dumps({"agent": agent, "output": answer}))
        return 0
    sys.stderr.write(f"fake 1devtool-agent: unsupported arguments {args}\n")
    return 64


if __name__ == "__main__":
    sys.exit(main())
