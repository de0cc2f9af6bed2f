"""``rune council mcp``: the council as a Model Context Protocol server over stdio.

A door like the command line: it parses a tool call, calls the same library function
(``aconvene``) and hands back the result. It needs the optional ``mcp`` extra
(``pip install 'rune-council[mcp]'``); nothing here is imported by the rest of the package.
The package is not called ``mcp`` so that it can never shadow the SDK's own import name.
"""

from __future__ import annotations

from .settings import ServerSettings

__all__ = ["ServerSettings"]
