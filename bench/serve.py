"""What `rune council serve` adds on top of the library, and how it holds under load.

    .venv/bin/python bench/serve.py                    # about a minute
    .venv/bin/python bench/serve.py --repeat 5 --councils 50 --transitions 200

Every voice is the test suite's fake CLI (`tests/fakes`) installed as claude, codex and
gemini in a private bin directory that is the only thing on PATH, so no real AI CLI and no
network are involved. The server is a real `rune council serve` process on a loopback port.
Nothing is asserted; the figures are printed.

1. API overhead per council. The same three-voice council (fakes answer at once, detect
   cache warm) timed in-process with `convene()`, and through the server: POST, then the
   event stream followed to its `end` frame. Interleaved, one of each per repeat; the
   difference of the medians is what the HTTP door costs.
2. Run-file write to SSE event. This process plays the orchestrator: it writes a run file
   through the real recorder, one transition at a time, while a client follows
   /v1/councils/{id}/events. The clock starts when the rename returns and stops when the
   matching `transition` frame arrives at the client.
3. Load. N councils posted at once (one thread each) to a server with --max-concurrent 8;
   voices sleep 0.5 s. Reported: status codes of every request, whether every council
   completed, and whether every run file validates against contracts/council-result.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import jsonschema  # noqa: E402

from rune_council import CouncilOptions  # noqa: E402
from rune_council.core.contract import (  # noqa: E402
    CouncilResult,
    Orchestrator,
    PerspectiveRequest,
    RunEvent,
)
from rune_council.council import convene, now  # noqa: E402
from rune_council.recorder import RunRecorder  # noqa: E402
from tests.fakes.bin import path_with  # noqa: E402
from tests.helpers import PLAN, QUESTION, council_result_schema  # noqa: E402
from tests.web.serving import base_env, install_voices, sse, start  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def request(run_id: str) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": QUESTION,
        "n": 3,
        "artifact": {"name": "plan.md", "text": PLAN},
    }


def overhead(home: Path, repeat: int) -> None:
    install_voices(home / "bin")
    os.environ["PATH"] = path_with(home / "bin")
    os.environ["HOME"] = str(home)
    rune = home / ".rune"
    server = start(home, "--yes")
    try:
        convene(request("warm-lib"), CouncilOptions(rune_dir=rune, allow_external=True))
        server.post({"request": request("warm-api")})
        sse(server.client, "warm-api")
        lib: list[float] = []
        api: list[float] = []
        for i in range(repeat):
            t = time.perf_counter()
            convene(request(f"lib-{i}"), CouncilOptions(rune_dir=rune, allow_external=True))
            lib.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = server.post({"request": request(f"api-{i}")})
            assert r.status_code == 202, r.text
            frames = sse(server.client, f"api-{i}")
            api.append(time.perf_counter() - t)
            assert frames[-1][2]["status"] == "complete", frames[-1]
    finally:
        server.stop()
    ml, ma = statistics.median(lib) * 1000, statistics.median(api) * 1000
    print(f"1. API overhead per council ({repeat} repeats, three fake voices answering at once)")
    print(f"   convene() in-process     median {ml:7.0f} ms   min {min(lib) * 1000:7.0f} ms")
    print(f"   POST + SSE to the end    median {ma:7.0f} ms   min {min(api) * 1000:7.0f} ms")
    print(f"   overhead                 median {ma - ml:7.0f} ms")


def sse_delay(home: Path, transitions: int) -> None:
    server = start(home)
    path = server.council_dir / "run-latency.json"
    started = now()
    result = CouncilResult(
        id="latency",
        question="How fast does a transition reach a browser?",
        mode="judge",
        voices_requested=2,
        request=PerspectiveRequest(id="latency", question="How fast?"),
        orchestrator=Orchestrator(
            pid=os.getpid(), host=os.uname().nodename, started_at=started, heartbeat_at=started
        ),
        started_at=started,
        run_file=str(path),
    )
    recorder = RunRecorder(path)
    recorder.write(result)
    written: dict[int, float] = {}
    arrived: dict[int, float] = {}
    ready = threading.Event()

    def follow() -> None:
        client = httpx.Client(base_url=server.base, timeout=120)
        with client.stream("GET", "/v1/councils/latency/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: status"):
                    ready.set()
                if line.startswith("id: "):
                    arrived[int(line[4:])] = time.time()
                if line.startswith("event: end"):
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    ready.wait(30)
    try:
        for seq in range(1, transitions + 1):
            result.events.append(
                RunEvent(seq=seq, at=now(), kind="voice.status", voice_id="v1", status="running")
            )
            recorder.write(result)
            written[seq] = time.time()
            deadline = time.monotonic() + 5
            while seq not in arrived and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.02)
        result.status = "complete"
        result.finished_at = now()
        recorder.write(result)
        reader.join(30)
    finally:
        server.stop()
    delays = [(arrived[s] - written[s]) * 1000 for s in written if s in arrived]
    print(f"2. Run-file write -> SSE transition at the client ({len(delays)} of {transitions})")
    print(
        f"   p50 {pct(delays, 50):6.1f} ms   p95 {pct(delays, 95):6.1f} ms   "
        f"max {max(delays):6.1f} ms   (target p95 <= 100 ms)"
    )


def load(home: Path, councils: int) -> None:
    install_voices(home / "bin", sleeps=(0.5, 0.5, 0.5))
    server = start(
        home, "--yes", "--max-concurrent", "8", "--max-queued", str(councils), env=base_env(home)
    )
    codes: list[int] = []
    lock = threading.Lock()

    def post(i: int) -> int:
        with httpx.Client(base_url=server.base, timeout=60) as client:
            code = client.post("/v1/councils", json={"request": request(f"load-{i}")}).status_code
        with lock:
            codes.append(code)
        return code

    t = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=councils) as pool:
            list(pool.map(post, range(councils)))
        peak_queued = server.client.get("/healthz").json()["queued"]
        pending = {f"load-{i}" for i in range(councils)}
        deadline = time.monotonic() + 600
        while pending and time.monotonic() < deadline:
            for run_id in list(pending):
                r = server.client.get(f"/v1/councils/{run_id}")
                codes.append(r.status_code)
                if r.status_code == 200 and r.json()["status"] not in ("queued", "running"):
                    pending.discard(run_id)
            time.sleep(0.25)
        wall = time.perf_counter() - t
    finally:
        server.stop()
    schema = council_result_schema()
    statuses: dict[str, int] = {}
    invalid = 0
    for i in range(councils):
        doc = json.loads((server.council_dir / f"run-load-{i}.json").read_text())
        statuses[doc["status"]] = statuses.get(doc["status"], 0) + 1
        try:
            jsonschema.validate(doc, schema)
        except jsonschema.ValidationError:
            invalid += 1
    by_code = {c: codes.count(c) for c in sorted(set(codes))}
    print(f"3. {councils} councils posted at once, --max-concurrent 8, voices take 0.5 s")
    print(f"   status codes {by_code}; 5xx: {sum(n for c, n in by_code.items() if c >= 500)}")
    print(f"   queued right after the burst: {peak_queued}; all done in {wall:.1f} s")
    print(f"   run files: {statuses}; failing the schema: {invalid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--transitions", type=int, default=200)
    parser.add_argument("--councils", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("overhead", "sse", "load"):
            (Path(tmp) / name).mkdir()
        overhead(Path(tmp) / "overhead", args.repeat)
        sse_delay(Path(tmp) / "sse", args.transitions)
        load(Path(tmp) / "load", args.councils)


if __name__ == "__main__":
    main()
