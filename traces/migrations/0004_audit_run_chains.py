"""Audit chains per run: a tenant's records (one chain until now) become one chain per run
(numbered 1..n per run, re-hashed over their normalised payload), and each run is linked into
its tenant's chain of run links, in the order of each run's last record.

The old chains are verified first: re-hashing a tampered chain would launder the tampering, so
the migration stops and names the breaks unless ``HARNESS_AUDIT_MIGRATE_BROKEN_CHAINS=1`` (set it
once the evidence is saved, e.g. a database dump).
"""

import math
import os

import django.utils.timezone
from django.db import migrations, models

GENESIS_HASH = "0" * 64


def _finite(value):
    # SQLite's JSON text may hold NaN/Infinity (PostgreSQL's jsonb cannot): kept as text.
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _old_chain_fault(tenant, AuditRecord, AuditChainHead, AuditCheckpoint, record_hash, sign_link):
    """The first break of ``tenant``'s old (tenant-wide) chain, as text; None if it holds."""
    checkpoint = AuditCheckpoint.objects.filter(tenant=tenant).first()
    expected, prev_hash = 1, GENESIS_HASH
    if checkpoint is not None:
        expected, prev_hash = checkpoint.sequence + 1, checkpoint.hash
        if checkpoint.signature != sign_link("checkpoint", tenant, checkpoint.sequence, prev_hash):
            return "the retention checkpoint's signature does not match"
    records = AuditRecord.objects.filter(tenant=tenant, sequence__gte=expected)
    for record in records.order_by("sequence").iterator():
        if record.sequence != expected:
            return f"record {expected} is missing"
        if record.prev_hash != prev_hash:
            return f"record {expected} does not link to the one before"
        content = {
            "tenant": record.tenant,
            "sequence": record.sequence,
            "prev_hash": record.prev_hash,
            "request_id": record.request_id,
            "span_id": record.span_id,
            "kind": record.kind,
            "payload": record.payload,
            "created_at": record.created_at,
        }
        if record_hash(**content) != record.hash:
            return f"record {expected} (id {record.id}) does not match its hash"
        expected, prev_hash = expected + 1, record.hash
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    if head is not None and (head.sequence != expected - 1 or head.hash != prev_hash):
        return "the chain's last record is not the one its head names"
    return None


def chain_runs(apps, schema_editor):
    # Today's hashing and normalising code: the records as they stand when run chains start.
    from traces.chain import link_hash, normalize_json, record_hash, sign_link

    AuditRecord = apps.get_model("traces", "AuditRecord")
    AuditRunLink = apps.get_model("traces", "AuditRunLink")
    AuditChainHead = apps.get_model("traces", "AuditChainHead")
    AuditCheckpoint = apps.get_model("traces", "AuditCheckpoint")
    tenants = set(AuditRecord.objects.values_list("tenant", flat=True).distinct())
    tenants.update(AuditChainHead.objects.values_list("tenant", flat=True))
    broken = {}
    for tenant in sorted(tenants):
        fault = _old_chain_fault(
            tenant, AuditRecord, AuditChainHead, AuditCheckpoint, record_hash, sign_link
        )
        if fault is not None:
            broken[tenant] = fault
    if broken and os.environ.get("HARNESS_AUDIT_MIGRATE_BROKEN_CHAINS") != "1":
        raise RuntimeError(
            "audit chains do not verify, re-chaining them would hide it: "
            + "; ".join(f"{tenant}: {fault}" for tenant, fault in broken.items())
            + ". Save the evidence, then migrate with HARNESS_AUDIT_MIGRATE_BROKEN_CHAINS=1."
        )
    for tenant in sorted(tenants):
        heads = {}  # run -> (sequence, hash, old tenant sequence of its last record, created_at)
        for record in AuditRecord.objects.filter(tenant=tenant).order_by("sequence").iterator():
            sequence, prev_hash, _, _ = heads.get(record.request_id, (0, GENESIS_HASH, 0, None))
            old_sequence = record.sequence
            record.payload = normalize_json(_finite(record.payload))
            record.sequence, record.prev_hash = sequence + 1, prev_hash
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
            record.save(update_fields=["payload", "sequence", "prev_hash", "hash"])
            heads[record.request_id] = (
                record.sequence,
                record.hash,
                old_sequence,
                record.created_at,
            )
        link_sequence, prev_hash = 0, GENESIS_HASH
        for request_id, (sequence, run_hash, _, created_at) in sorted(
            heads.items(), key=lambda item: item[1][2]
        ):
            link_sequence += 1
            link = AuditRunLink(
                tenant=tenant,
                sequence=link_sequence,
                request_id=request_id,
                run_sequence=sequence,
                run_hash=run_hash,
                prev_hash=prev_hash,
                created_at=created_at,
            )
            link.hash = link_hash(
                tenant=tenant,
                sequence=link_sequence,
                prev_hash=prev_hash,
                request_id=request_id,
                run_sequence=sequence,
                run_hash=run_hash,
                created_at=created_at,
            )
            link.save()
            prev_hash = link.hash
        AuditChainHead.objects.update_or_create(
            tenant=tenant,
            defaults={
                "sequence": link_sequence,
                "hash": prev_hash,
                "signature": sign_link("head", tenant, link_sequence, prev_hash),
            },
        )
    # Retention's old checkpoints named a record of the tenant-wide chain: the runs left start
    # from genesis now (the records before it are gone), so checkpoints restart at link 0.
    for checkpoint in AuditCheckpoint.objects.all():
        checkpoint.sequence, checkpoint.hash = 0, GENESIS_HASH
        checkpoint.signature = sign_link("checkpoint", checkpoint.tenant, 0, GENESIS_HASH)
        checkpoint.save(update_fields=["sequence", "hash", "signature"])


def chain_tenants(apps, schema_editor):
    """Back to one chain per tenant, in id order (as migration 0002 built it)."""
    from traces.chain import record_hash, sign_link

    AuditRecord = apps.get_model("traces", "AuditRecord")
    AuditRunLink = apps.get_model("traces", "AuditRunLink")
    AuditChainHead = apps.get_model("traces", "AuditChainHead")
    AuditCheckpoint = apps.get_model("traces", "AuditCheckpoint")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET LOCAL harness.audit_retention = 'on'")
    AuditRunLink.objects.all().delete()
    heads = {}
    for record in AuditRecord.objects.order_by("id").iterator():
        sequence, prev_hash = heads.get(record.tenant, (0, GENESIS_HASH))
        record.sequence = sequence + 1
        record.prev_hash = prev_hash
        record.hash = record_hash(
            tenant=record.tenant,
            sequence=sequence + 1,
            prev_hash=prev_hash,
            request_id=record.request_id,
            span_id=record.span_id,
            kind=record.kind,
            payload=record.payload,
            created_at=record.created_at,
        )
        record.save(update_fields=["sequence", "prev_hash", "hash"])
        heads[record.tenant] = (sequence + 1, record.hash)
    AuditChainHead.objects.all().delete()
    for tenant, (sequence, last_hash) in heads.items():
        AuditChainHead.objects.create(
            tenant=tenant,
            sequence=sequence,
            hash=last_hash,
            signature=sign_link("head", tenant, sequence, last_hash),
        )
    for checkpoint in AuditCheckpoint.objects.all():
        checkpoint.signature = sign_link(
            "checkpoint", checkpoint.tenant, checkpoint.sequence, checkpoint.hash
        )
        checkpoint.save(update_fields=["signature"])


class Migration(migrations.Migration):

    dependencies = [
        ('traces', '0003_policy_decision_audit_kind'),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditRunLink',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(db_index=True, max_length=64)),
                ('sequence', models.PositiveBigIntegerField()),
                ('request_id', models.CharField(db_index=True, max_length=32)),
                ('run_sequence', models.PositiveBigIntegerField()),
                ('run_hash', models.CharField(max_length=64)),
                ('prev_hash', models.CharField(max_length=64)),
                ('hash', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['tenant', 'sequence'],
            },
        ),
        migrations.AlterModelOptions(
            name='auditrecord',
            options={'ordering': ['request_id', 'sequence']},
        ),
        migrations.RemoveConstraint(
            model_name='auditrecord',
            name='audit_unique_sequence',
        ),
        migrations.RunPython(chain_runs, chain_tenants),
        migrations.AddConstraint(
            model_name='auditrecord',
            constraint=models.UniqueConstraint(fields=('request_id', 'sequence'), name='audit_unique_run_sequence'),
        ),
        migrations.AddConstraint(
            model_name='auditrunlink',
            constraint=models.UniqueConstraint(fields=('tenant', 'sequence'), name='audit_link_unique_sequence'),
        ),
        migrations.AddConstraint(
            model_name='auditrunlink',
            constraint=models.UniqueConstraint(fields=('request_id', 'run_sequence'), name='audit_link_unique_run_head'),
        ),
    ]
