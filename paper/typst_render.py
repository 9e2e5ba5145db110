"""What the sections describe, in Typst: prose (``experiments.section_content.Text``), tables and string literals.

The one place that knows Typst's markup: every plain string is escaped here (no character of it is markup), and
each marked span becomes its Typst form. ``paper/build.py`` writes the generated files with these.
"""

from __future__ import annotations

from experiments.section_content import Prose, Span, Table, Text

SMALL_PT = 7      # the size of a table's small aside (a run's mode and seeds beside its verdict)


def esc(text: str) -> str:
    """Text for a Typst content block: markup characters escaped."""
    out = "".join("\\" + ch if ch in "\\#*_`$@<>[]~/" else ch for ch in str(text))
    return out.replace("--", "-\\-").replace("...", ".\\..")   # no en dash, no ellipsis: literal text


def tstr(text: str) -> str:
    """A Typst string literal."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(prose: Prose) -> str:
    """Typst content (for a ``[...]`` block) of a plain string or a ``Text``."""
    if isinstance(prose, str):
        return esc(prose)
    return "".join(esc(part) if isinstance(part, str) else _span(part) for part in prose.parts)


def _span(span: Span) -> str:
    body = span.body
    inner = render(body) if isinstance(body, Text) else esc(body)
    if span.kind == "code":
        return "#raw(" + tstr(str(body)) + ")"
    if span.kind == "strong":
        return f"#strong[{inner}]"
    if span.kind == "emph":
        return f"#emph[{inner}]"
    if span.kind == "small":
        return f"#text(size: {SMALL_PT}pt)[{inner}]"
    if span.kind == "ref":
        return f"@{body}"
    if span.kind == "cite":
        return f"#cite(<{body}>)"
    if span.kind == "break":
        return " \\ "
    raise ValueError(f"unknown span kind {span.kind!r}")


def render_table(table: Table) -> str:
    """A Typst ``table(...)`` expression: the header in bold, a row of one cell across every column."""
    n = len(table.header)
    widths = table.widths or ["auto"] * n
    aligns = table.aligns or ["left"] + ["right"] * (n - 1)
    lines = [f"table(columns: ({', '.join(widths)},),",
             "  align: (" + ", ".join(aligns) + ",),",
             "  table.header(" + ", ".join(f"[*{esc(h)}*]" for h in table.header) + "),"]
    for row in table.rows:
        if len(row) == 1:
            lines.append(f"  table.cell(colspan: {n}, align: left)[{render(row[0])}],")
        else:
            lines.append("  " + ", ".join(f"[{render(c)}]" for c in row) + ",")
    lines.append(")")
    return "\n".join(lines)
