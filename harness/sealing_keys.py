"""Rotation of the sealing key: every sealed column of the project, and how to reseal one."""

from __future__ import annotations

from django.db import models, transaction

from harness.models import Run, Session, WebhookDelivery
from tools.models import ToolExecution
from traces.sealing import ResealReport, reseal_values

SEALED_FIELDS: list[tuple[type[models.Model], str]] = [
    (Run, "sealed"),
    (Session, "sealed_messages"),
    (WebhookDelivery, "sealed_payload"),
    (ToolExecution, "sealed_outcome"),
]


def reseal_field(model: type[models.Model], field: str, batch_size: int = 500) -> ResealReport:
    """Re-encrypt ``model.field`` of every row with the newest sealing key, in batches (each its
    own transaction). Idempotent: resealing a value sealed with the newest key rewrites it with
    the same key. A row whose value no listed key opens is left untouched and counted."""
    total = ResealReport()
    last_pk = None
    while True:
        rows = model.objects.exclude(**{field: ""}).order_by("pk")
        if last_pk is not None:
            rows = rows.filter(pk__gt=last_pk)
        batch = list(rows.values_list("pk", field)[:batch_size])
        if not batch:
            return total
        last_pk = batch[-1][0]
        with transaction.atomic():
            report = reseal_values(
                batch,
                # Only if unchanged since read: a run writing meanwhile keeps its new value.
                lambda pk, old, new: model.objects.filter(pk=pk, **{field: old}).update(
                    **{field: new}
                ),
            )
        total.resealed += report.resealed
        total.unreadable += report.unreadable
