"""A run's end is final inside the tenant's chain: ``AuditRunLink.final`` (covered by the link's
hash when true; links written before it read false and keep their hash). A final link may name
the same record as the run's last pause link (a run cancelled while it waited), so the unique
run head becomes (run, run sequence, final); a run has at most one final link.

``AuditChainHead.final_links_from``: each existing tenant's links up to its head were written
before final links existed, so verification accepts a non-final last link of an ended run
there (and only there); a new tenant's head starts at 1 (every ended run's link is final).
"""

from django.db import migrations, models


def mark_links_before_final(apps, schema_editor):
    AuditChainHead = apps.get_model("traces", "AuditChainHead")
    AuditChainHead.objects.update(final_links_from=models.F("sequence") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0007_spans_and_audit_without_redundant_indexes"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="auditrunlink",
            name="audit_link_unique_run_head",
        ),
        migrations.AddField(
            model_name="auditchainhead",
            name="final_links_from",
            field=models.PositiveBigIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="auditrunlink",
            name="final",
            field=models.BooleanField(default=False),
        ),
        migrations.AddConstraint(
            model_name="auditrunlink",
            constraint=models.UniqueConstraint(
                fields=("request_id", "run_sequence", "final"),
                name="audit_link_unique_run_head_final",
            ),
        ),
        migrations.AddConstraint(
            model_name="auditrunlink",
            constraint=models.UniqueConstraint(
                condition=models.Q(("final", True)),
                fields=("request_id",),
                name="audit_link_one_final_per_run",
            ),
        ),
        migrations.RunPython(mark_links_before_final, migrations.RunPython.noop),
    ]
