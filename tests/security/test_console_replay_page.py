"""The replay page reads the run's clear (sealed) copy: what it shows of it is escaped, and
masked as the run's own page shows it (threat model, "Replay page")."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from harness.models import Run
from tests.runs import ADMIN, TICKET, call, run_script

HOSTILE = '</pre><script>alert("answer")</script><img src=x onerror=alert(1)>'
PHONE = "13812345678"


def test_a_hostile_answer_is_escaped_and_its_personal_data_masked(acme, agent_dir):
    assign = {"ticket_id": TICKET, "action": "assign", "assignee_id": "agent-li"}
    # A claim today's honesty guard flags once the call is refused: the answer changes.
    answer = f"I assigned the ticket to agent-li. {HOSTILE} Call the customer on {PHONE}."
    run = run_script(acme, agent_dir, [call("update_ticket", **assign), {"text": answer}])
    refuse = {"name": "no-assign", "kind": "call", "tool": "update_ticket", "effect": "refuse"}
    assert acme.post("/api/v1/policies/rules", refuse, **ADMIN).status_code == 201
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))

    page = client.get(f"/admin/harness/run/{Run.objects.get(id=run['id']).pk}/replay/")

    html = page.content.decode()
    assert page.status_code == 200
    assert "would change" in html
    diff = html.split('<pre class="answer-diff">')[1].split("</pre>")[0]
    assert "&lt;img src=x onerror=alert(1)&gt;" in diff
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;answer&quot;)&lt;/script&gt;" in html
    assert PHONE not in html
    assert "138****5678" in html
