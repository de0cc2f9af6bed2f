"""Start ``rune council mcp`` as a real subprocess and talk to it with the SDK's stdio client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tests.fakes.bin import path_with


def server_env(tmp: Path, **extra: str) -> dict[str, str]:
    return {"PATH": path_with(tmp / "bin"), "HOME": str(tmp), "LANG": "C.UTF-8", **extra}


@asynccontextmanager
async def connect(
    tmp: Path,
    *args: str,
    env: dict[str, str] | None = None,
    elicitation: Any = None,
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rune_council.cli", "council", "mcp", *args],
        env=env if env is not None else server_env(tmp),
        cwd=str(tmp),
    )
    errlog = (tmp / "server-stderr.log").open("w")
    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            kwargs: dict[str, Any] = {}
            if elicitation is not None:
                kwargs["elicitation_callback"] = elicitation
            async with ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                yield session
    finally:
        errlog.close()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
