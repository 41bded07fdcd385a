"""The study report as one self-contained HTML file: the blocks of :func:`lexkit.study.report.document`
(the same tables the markdown shows, from the same data), figures embedded as base64 PNG data
URIs, the best value of each scored column marked, a table of contents linking every section.
No external resource (no script, font, stylesheet or image from elsewhere): it opens offline.
"""

from __future__ import annotations

import base64
import re
from html import escape

from .blocks import Block, Bullets, Figure, Heading, Table, Text

STYLE = """
:root { --ink: #1d232b; --muted: #5b6672; --line: #d5dbe1; --band: #f4f6f8; --best: #d8f0dc; --accent: #1f5f99; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
       font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 1.9em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.3em; margin: 2em 0 0.6em; padding-bottom: 0.2em; border-bottom: 2px solid var(--line); }
h2 a.up { float: right; font-size: 0.65em; font-weight: normal; color: var(--muted); text-decoration: none;
          margin-top: 0.5em; }
a { color: var(--accent); }
code { font: 0.92em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--band);
       padding: 0 0.25em; border-radius: 3px; }
nav.toc { background: var(--band); border: 1px solid var(--line); border-radius: 6px; padding: 10px 18px;
          margin: 1em 0 1.5em; }
nav.toc h2 { border: 0; margin: 0.2em 0; font-size: 1.05em; }
nav.toc ol { margin: 0.3em 0; padding-left: 1.4em; }
.scroll { overflow-x: auto; margin: 0.6em 0 1.2em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 0.92em; }
p.rule { color: var(--muted); font-size: 0.88em; margin: -0.9em 0 1.2em; }
th, td { border: 1px solid var(--line); padding: 4px 9px; white-space: nowrap; }
th { background: var(--band); text-align: center; white-space: normal; min-width: 4.5em; }
td.num { text-align: right; }
tbody tr:nth-child(even) td { background: #fafbfc; }
tbody tr td.best { background: var(--best); font-weight: 600; }
table.wide td:last-child { white-space: normal; }
figure { margin: 1em 0 1.6em; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 0.9em; }
"""

_INLINE = [(re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
           (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
           (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"<em>\1</em>")]


def inline(text: str) -> str:
    """A line of report text as HTML: escaped, then ```code```, ``**bold**``, ``*emphasis*``."""
    out = escape(text, quote=False)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out


def anchor(text: str, taken: set[str]) -> str:
    """A unique id for a heading."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


def table_html(table: Table) -> str:
    best = table.marked()
    numeric = set(table.best) | {j for row in table.values for j, v in enumerate(row) if v is not None}
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
    body = []
    for i, row in enumerate(table.rows):
        cells = []
        for j, text in enumerate(row):
            classes = " ".join(c for c, on in (("num", j in numeric), ("best", (i, j) in best)) if on)
            attr = f' class="{classes}"' if classes else ""
            cells.append(f"<td{attr}>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    rule = f'<p class="rule">{escape(table.rule)}</p>' if table.rule and best else ""
    wide = ' class="wide"' if not numeric else ""
    return (f'<div class="scroll"><table{wide}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>{rule}")


def figure_html(block: Figure, images: dict[str, bytes]) -> str:
    data = images.get(block.name)
    if data is None:
        return f'<p class="missing">({escape(block.alt)}: nothing to draw)</p>'
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (f'<figure><img src="{uri}" alt="{escape(block.alt)}">'
            f"<figcaption>{escape(block.alt)} ({escape(block.name)})</figcaption></figure>")


def html(blocks: list[Block], images: dict[str, bytes]) -> str:
    """The report page: ``blocks`` in order, sections (level-2 headings) listed in a table of
    contents after the title, ``images``: figure file name -> PNG bytes."""
    taken = {"contents"}
    ids = {i: anchor(b.text, taken) for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 2}
    title = next((b.text for b in blocks if isinstance(b, Heading)), "report")
    toc = "".join(f'<li><a href="#{ids[i]}">{inline(blocks[i].text)}</a></li>' for i in ids)
    parts = []
    for i, block in enumerate(blocks):
        if isinstance(block, Heading):
            if i in ids:
                up = '<a class="up" href="#contents">↑ contents</a>'
                parts.append(f'<h2 id="{ids[i]}">{inline(block.text)}{up}</h2>')
            else:
                parts.append(f"<h{block.level}>{inline(block.text)}</h{block.level}>")
            if block.level == 1 and ids:
                parts.append(f'<nav class="toc" id="contents"><h2>Contents</h2><ol>{toc}</ol></nav>')
        elif isinstance(block, Text):
            parts.append(f"<p>{inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Figure):
            parts.append(figure_html(block, images))
        else:
            parts.append(table_html(block))
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n"
            "</body>\n</html>\n")
