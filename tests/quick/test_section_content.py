"""The seam between the experiments and the paper: a section describes its content as data
(``experiments.section_content``), and only ``paper.typst_render`` knows Typst."""

from __future__ import annotations

import pytest

from experiments.section_content import LINE_BREAK, Table, Text, code, joined_text, ref, small, strong, text
from paper.typst_render import render, render_table


def test_a_plain_string_is_never_markup():
    assert render("a_b *c* @d #e 1/2 ...") == "a\\_b \\*c\\* \\@d \\#e 1\\/2 .\\.."


def test_marked_spans_render_as_typst_and_their_words_stay_escaped():
    prose = text("see ", ref("tab-x"), ": ", strong("a_b"), " ", code('x "y"'), " ", small("(1 seed)"))
    assert render(prose) == 'see @tab-x: #strong[a\\_b] #raw("x \\"y\\"") #text(size: 7pt)[(1 seed)]'
    assert prose.plain() == 'see tab-x: a_b x "y" (1 seed)'


def test_a_text_refuses_an_f_string():
    with pytest.raises(TypeError, match="f-string"):
        f"{strong('x')}"


def test_texts_join_and_add_with_strings():
    joined = joined_text(", ", [code("a"), "b", strong("c")])
    assert render(joined) == '#raw("a"), b, #strong[c]'
    assert render("x " + code("y") + " z") == 'x #raw("y") z'
    assert Text("a", "", "b") == Text("ab")


def test_a_row_of_one_cell_spans_the_table_and_cells_are_rendered():
    table = Table(["A", "B"], [["1", strong("2")], [text("all", LINE_BREAK, "one")]])
    typst = render_table(table)
    assert "[1], [#strong[2]]," in typst
    assert "table.cell(colspan: 2, align: left)[all \\ one]," in typst
    with pytest.raises(AssertionError):
        Table(["A", "B"], [["1", "2", "3"]])
