"""What an HTTP voice costs on top of the model: client reuse versus a client per call.

Run: .venv/bin/python bench/http_client.py [--calls N] [--repeat R]

A loopback OpenAI-compatible server (tests/http_server.py) answers instantly, so every
figure is client-side overhead. Rows:

- shared client: ``EndpointClient.chat`` N times on one keep-alive client (what a run
  does), with the answer whole and streamed
- new client per call, shared TLS context: a fresh httpx client and connection each call
- new client per call, default TLS: what a peer that builds ``httpx.AsyncClient()`` per call
  pays, CA bundle loading included
- TLS context alone: ``httpx.create_ssl_context()``, the part the shared context saves

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from rune_council.runtimes.http import EndpointClient, shared_tls_context  # noqa: E402
from tests.http_server import OpenAIServer, answering  # noqa: E402

MODEL = "meta/llama-3.3-70b-instruct"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False}


async def per_call(calls: int, once: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await once()
    return (time.perf_counter() - started) / calls


async def shared(base: str, calls: int, *, stream: bool = False) -> float:
    client = EndpointClient("bench", base)
    await client.chat(MODEL, "warm", timeout_s=10, max_output_bytes=100_000, stream=stream)

    async def once() -> None:
        result = await client.chat(
            MODEL, "hi", timeout_s=10, max_output_bytes=100_000, stream=stream
        )
        assert result.outcome == "ok", result

    try:
        return await per_call(calls, once)
    finally:
        await client.aclose()


async def fresh(base: str, calls: int, *, reuse_tls: bool) -> float:
    async def once() -> None:
        verify = shared_tls_context() if reuse_tls else True
        async with httpx.AsyncClient(verify=verify, trust_env=False) as client:
            response = await client.post(f"{base}/chat/completions", json=BODY)
            response.raise_for_status()

    return await per_call(calls, once)


def tls_alone(calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        httpx.create_ssl_context()
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {
        "shared client (keep-alive)": [],
        "shared client, streamed answer": [],
        "new client per call, shared TLS context": [],
        "new client per call, default TLS": [],
        "TLS context alone": [],
    }
    with OpenAIServer(models=[MODEL], behaviours={MODEL: answering("ok")}) as server:
        base = server.base_url
        for _ in range(args.repeat):
            names = list(rows)
            rows[names[0]].append(asyncio.run(shared(base, args.calls)))
            rows[names[1]].append(asyncio.run(shared(base, args.calls, stream=True)))
            rows[names[2]].append(asyncio.run(fresh(base, args.calls, reuse_tls=True)))
            few = max(5, args.calls // 5)
            rows[names[3]].append(asyncio.run(fresh(base, few, reuse_tls=False)))
            rows[names[4]].append(tls_alone(few))
    print(f"per call, {args.calls} calls x {args.repeat} repeats (median / min, ms)")
    for name, values in rows.items():
        med, low = statistics.median(values) * 1000, min(values) * 1000
        print(f"  {name:<42} {med:7.2f} / {low:7.2f}")


if __name__ == "__main__":
    main()
