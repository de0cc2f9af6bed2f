"""One self-contained HTML page: the tables, and the pictures as ``data:`` URIs.

Every string that reaches the page is escaped (names come from run files, which are
untrusted), and the page's content security policy allows no script and no fetch, only
its own inline style and embedded images, so a page opened from anywhere loads nothing.
"""

from __future__ import annotations

import base64
import html

from .aggregate import Stats
from .tables import summary_line, tables

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 0.3rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f3f3f3; }
p.note, p.meta { color: #555; margin-top: 0; }
figure { margin: 1.2rem 0; }
img { max-width: 100%; border: 1px solid #eee; }
"""


def page(
    stats: Stats,
    pictures: dict[str, tuple[str, bytes]],
    *,
    title: str = "rune council stats",
    notes: list[str] | None = None,
) -> str:
    """The whole page; ``pictures`` maps a file name to (caption, PNG bytes)."""
    e = html.escape
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">',
        f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    parts.append(f'<p class="meta">{e(summary_line(stats))}</p>')
    for s in stats.files.skipped_files:
        parts.append(f'<p class="meta">skipped {e(s.file)}: {e(s.reason)}</p>')
    for note in notes or []:
        parts.append(f'<p class="meta">{e(note)}</p>')
    for table in tables(stats):
        parts.append(f"<h2>{e(table.title)}</h2>")
        if not table.rows:
            parts.append(f'<p class="note">{e(table.empty or "(none)")}</p>')
            continue
        head = "".join(f"<th>{e(h)}</th>" for h in table.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table.rows
        )
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        if table.note:
            parts.append(f'<p class="note">{e(table.note)}</p>')
    if pictures:
        parts.append("<h2>Pictures</h2>")
    for name, (caption, png) in pictures.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{e(caption)} ({e(name)})</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
