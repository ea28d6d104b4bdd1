"""Plans are stored masked (``Run.plans``), their clear copy sealed (``Run.sealed_plans``).

Plans written before were stored in clear: each is sealed, then masked with its tenant's
masker (fingerprints kept under the run's request id, as for every masked value)."""

from django.db import migrations, models


def seal_and_mask_plans(apps, schema_editor):
    from traces.services import mask_for_storage, seal

    Run = apps.get_model("harness", "Run")
    clear = Run.objects.exclude(plans=[]).filter(sealed_plans="").select_related("tenant")
    for run in clear.iterator(chunk_size=200):
        masked = mask_for_storage(run.request_id, run.tenant.slug, run.plans)
        Run.objects.filter(pk=run.pk, sealed_plans="").update(
            sealed_plans=seal(run.plans), plans=masked
        )


class Migration(migrations.Migration):
    dependencies = [
        ("harness", "0007_run_outcome"),
        # The masking of old plans stores fingerprints and reads tenants' masking patterns.
        ("traces", "0007_spans_and_audit_without_redundant_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="sealed_plans",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(seal_and_mask_plans, migrations.RunPython.noop, elidable=True),
    ]
