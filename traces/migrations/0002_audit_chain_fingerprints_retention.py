"""Chain the audit records per tenant (existing records are chained in id order), add the chain
heads, retention checkpoints, fingerprints and retention policies."""

import django.core.validators
import django.utils.timezone
from django.db import migrations, models


def chain_existing_records(apps, schema_editor):
    # Uses today's hashing code: these are the records as they stand when chaining starts.
    from traces.chain import GENESIS_HASH, record_hash, sign_link

    AuditRecord = apps.get_model("traces", "AuditRecord")
    AuditChainHead = apps.get_model("traces", "AuditChainHead")
    heads = {}
    for record in AuditRecord.objects.order_by("id").iterator():
        sequence, prev_hash = heads.get(record.tenant, (0, GENESIS_HASH))
        record.sequence = sequence + 1
        record.prev_hash = prev_hash
        record.hash = record_hash(
            tenant=record.tenant,
            sequence=record.sequence,
            prev_hash=prev_hash,
            request_id=record.request_id,
            span_id=record.span_id,
            kind=record.kind,
            payload=record.payload,
            created_at=record.created_at,
        )
        record.save(update_fields=["sequence", "prev_hash", "hash"])
        heads[record.tenant] = (record.sequence, record.hash)
    for tenant, (sequence, last_hash) in heads.items():
        AuditChainHead.objects.create(
            tenant=tenant,
            sequence=sequence,
            hash=last_hash,
            signature=sign_link("head", tenant, sequence, last_hash),
        )


class Migration(migrations.Migration):

    dependencies = [
        ("traces", "0001_spans_and_audit"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditChainHead",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant", models.CharField(max_length=64, unique=True)),
                ("sequence", models.PositiveBigIntegerField(default=0)),
                ("hash", models.CharField(max_length=64)),
                ("signature", models.CharField(max_length=64)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant", models.CharField(max_length=64, unique=True)),
                ("sequence", models.PositiveBigIntegerField(default=0)),
                ("hash", models.CharField(max_length=64)),
                ("signature", models.CharField(max_length=64)),
                ("deleted_before", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name="Fingerprint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("request_id", models.CharField(max_length=32)),
                ("tenant", models.CharField(max_length=64)),
                ("kind", models.CharField(max_length=20)),
                ("digest", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["tenant", "digest"], name="fingerprint_tenant_digest"),
                    models.Index(fields=["tenant", "created_at"], name="fingerprint_tenant_created"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("request_id", "kind", "digest"), name="fingerprint_unique_per_trace")
                ],
            },
        ),
        migrations.CreateModel(
            name="RetentionPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant", models.CharField(max_length=64, unique=True)),
                ("days", models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1)])),
            ],
            options={
                "verbose_name_plural": "retention policies",
            },
        ),
        migrations.AlterField(
            model_name="auditrecord",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="sequence",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="prev_hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(chain_existing_records, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="auditrecord",
            name="sequence",
            field=models.PositiveBigIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="auditrecord",
            constraint=models.UniqueConstraint(fields=("tenant", "sequence"), name="audit_unique_sequence"),
        ),
    ]
