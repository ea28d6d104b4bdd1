"""One typed record per span kind: the engine writes a ``model_call`` span's attributes through
``ModelCall`` and the console reads them back through it, so a key one side renames and the
other does not fails here rather than showing a step with no tokens."""

from __future__ import annotations

from decimal import Decimal

from harness.console.reads import run_timeline
from traces.span_records import ModelCall
from harness.models import Run
from tests.runs import demo_run
from traces.models import Span


def test_every_attribute_of_a_model_call_span_is_a_field_of_its_record(acme, settings):
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 1.0, "output": 2.0}}}
    run = Run.objects.get(id=demo_run(acme)["id"])

    spans = list(Span.objects.filter(request_id=run.request_id, kind="model_call"))

    assert spans
    for span in spans:
        record = ModelCall.from_attributes(span.attributes)
        assert record.attributes() == span.attributes
        assert record.step is not None
        assert record.prompt_tokens
        assert record.context_method


def test_the_console_reads_each_steps_tokens_and_cost_from_the_record(acme, settings):
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 1.0, "output": 2.0}}}
    run = Run.objects.get(id=demo_run(acme)["id"])

    timeline = run_timeline(run)

    assert [step.number for step in timeline.steps] == list(range(1, run.steps + 1))
    assert timeline.prompt_tokens == run.prompt_tokens > 0
    assert timeline.completion_tokens == run.completion_tokens > 0
    assert timeline.cost_usd == run.cost_usd > Decimal(0)


def test_a_part_says_only_its_own_fields_and_the_answer_says_an_unknown_cost():
    assert ModelCall(step=3).attributes() == {"step": 3}
    assert ModelCall(plan=True, revision=False).attributes() == {"plan": True, "revision": False}
    answered = ModelCall(route="scripted:demo", prompt_tokens=5).attributes()
    assert answered == {"route": "scripted:demo", "prompt_tokens": 5, "cost_usd": None}
