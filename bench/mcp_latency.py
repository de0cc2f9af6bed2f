"""What a council costs through ``rune council mcp`` on top of the same council in-process.

Run: .venv/bin/python bench/mcp_latency.py [--repeat N]

The same council (three fake CLIs from tests/fakes as claude, codex and gemini, answering
at once) runs two ways, interleaved: ``convene()`` in this process, and the ``convene``
tool of a ``rune council mcp`` subprocess reached through the MCP SDK's stdio client, with
a progress callback like a host's. The difference of the medians is what the MCP door adds
to a council (target: under 50 ms). The server's start-up and the handshake are reported
apart: a host pays them once per session, not per council. So is the Python SDK client's
own check of each result against the output schema, which is the host's cost, not the
server's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The fakes and answer builders live in the test tree, which is not an installed package.
sys.path.insert(0, str(ROOT))

from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from rune_council import CouncilOptions, aconvene  # noqa: E402
from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import QUESTION, ROLLBACK, SHARDS, UNDO, answer  # noqa: E402

TARGET_MS = 50.0


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:7.1f} ms   min {min(values) * 1000:7.1f} ms"


async def bench(repeat: int, tmp: Path) -> None:
    bin_dir = tmp / "bin"
    install_fake(bin_dir, "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(bin_dir, "codex", answer=answer(QUESTION, "NO", [UNDO]))
    install_fake(bin_dir, "gemini", answer=answer(QUESTION, "YES", [SHARDS]))
    env = {"PATH": path_with(bin_dir), "HOME": str(tmp), "LANG": "C.UTF-8"}
    rune_dir = tmp / ".rune"
    direct: list[float] = []
    through_mcp: list[float] = []
    validated: list[float] = []
    notes: list[int] = []
    count = [0]

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rune_council.cli", "council", "mcp", "--yes", "--rune-dir", str(rune_dir)],
        env=env,
        cwd=str(tmp),
    )
    started = time.perf_counter()
    with (tmp / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            startup = time.perf_counter() - started

            async def progress(progress: float, total: float | None, message: str | None) -> None:
                count[0] += 1

            # One of each first, untimed: the detect cache and imports warm up.
            await aconvene(
                {"id": "warm-direct", "question": QUESTION},
                CouncilOptions(rune_dir=rune_dir, env=env, allow_external=True),
            )
            await session.call_tool("convene", {"question": QUESTION, "id": "warm-mcp"})
            for i in range(repeat):
                t0 = time.perf_counter()
                result = await aconvene(
                    {"id": f"direct-{i}", "question": QUESTION},
                    CouncilOptions(rune_dir=rune_dir, env=env, allow_external=True),
                )
                direct.append(time.perf_counter() - t0)
                assert result.voices_valid == 3, result.notes
                count[0] = 0
                t0 = time.perf_counter()
                # The request as any host sends it; ClientSession.call_tool would add
                # its own check of the result against the output schema (timed below).
                out = await session.send_request(
                    types.CallToolRequest(
                        params=types.CallToolRequestParams(
                            name="convene",
                            arguments={"question": QUESTION, "id": f"mcp-{i}"},
                        )
                    ),
                    types.CallToolResult,
                    progress_callback=progress,
                )
                through_mcp.append(time.perf_counter() - t0)
                assert not out.is_error and out.structured_content is not None, out.content
                assert out.structured_content["voices_valid"] == 3
                t0 = time.perf_counter()
                await session.call_tool("convene", {"question": QUESTION, "id": f"sdk-{i}"})
                validated.append(time.perf_counter() - t0)
                notes.append(count[0])

    added = statistics.median(through_mcp) - statistics.median(direct)
    added_min = min(through_mcp) - min(direct)
    worst = max(added, added_min) * 1000
    print(f"council of 3 fake voices answering at once, {repeat} repeats, interleaved")
    print(f"  convene() in-process        {ms(direct)}")
    print(f"  convene tool through MCP    {ms(through_mcp)}")
    print(
        f"  added by the MCP door       {added * 1000:7.1f} ms median, {added_min * 1000:.1f} ms "
        f"min (target < {TARGET_MS:.0f} ms: {'met' if worst < TARGET_MS else 'NOT met'})"
    )
    print(
        f"  the same via call_tool      {ms(validated)}  (the Python SDK client also checks "
        "the result against the output schema with jsonschema)"
    )
    print(f"  progress notifications      {statistics.median(notes):.0f} per council")
    print(f"  server start + handshake    {startup * 1000:7.1f} ms (once per host session)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rune-mcp-bench-") as tmp:
        asyncio.run(bench(args.repeat, Path(tmp)))


if __name__ == "__main__":
    main()
