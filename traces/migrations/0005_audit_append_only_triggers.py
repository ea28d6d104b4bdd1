"""On PostgreSQL, triggers refuse UPDATE and DELETE of audit records and run links, whoever
sends them (raw SQL included). Retention's deletion is the one sanctioned path: its transaction
sets ``SET LOCAL harness.audit_retention = 'on'``, which lets DELETE (never UPDATE) through.
Other databases rely on the ORM's guard (``AppendOnlyQuerySet``)."""

from django.db import migrations

TABLES = ("traces_auditrecord", "traces_auditrunlink")

CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION traces_audit_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('harness.audit_retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit rows are append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'raise_exception', HINT = 'only retention deletes audit rows';
END;
$$ LANGUAGE plpgsql;
"""


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(CREATE_FUNCTION, params=None)
    for table in TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION traces_audit_append_only()"
        )


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS traces_audit_append_only()")


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0004_audit_run_chains"),
    ]

    operations = [
        migrations.RunPython(create_triggers, drop_triggers),
    ]
