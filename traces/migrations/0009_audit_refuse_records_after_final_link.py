"""On PostgreSQL, a run's chain is closed by its final link (``AuditRunLink.final``, written when
the run ends): a trigger refuses audit records of a run that has a final link, and another
refuses any further link of such a run, whoever sends them (raw SQL included).

The record check is one statement-level trigger (``REFERENCING NEW TABLE``): one lookup per
insert statement, i.e. per step (a step's records go in one multi-row insert), through the
partial unique index of final links. Other databases have no trigger (as for the append-only
triggers of ``0005``); ``verify_audit`` reports records after a final link everywhere.
"""

from django.db import migrations

CREATE_FUNCTIONS = """
CREATE OR REPLACE FUNCTION traces_audit_records_after_final() RETURNS trigger AS $$
DECLARE
    ended text;
BEGIN
    SELECT r.request_id INTO ended
        FROM traces_audit_inserted_records r
        JOIN traces_auditrunlink l ON l.request_id = r.request_id AND l.final
        LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'run % has ended: audit records after its final link are refused', ended
            USING ERRCODE = 'raise_exception', HINT = 'a final link closes its run''s chain';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION traces_audit_links_after_final() RETURNS trigger AS $$
BEGIN
    -- The same final link again is let through to the unique constraint (anchoring twice
    -- is a no-op there: ON CONFLICT DO NOTHING).
    IF EXISTS (
        SELECT 1 FROM traces_auditrunlink l
        WHERE l.request_id = NEW.request_id AND l.final
            AND NOT (NEW.final AND l.run_sequence = NEW.run_sequence)
    ) THEN
        RAISE EXCEPTION 'run % has ended: links after its final link are refused', NEW.request_id
            USING ERRCODE = 'raise_exception', HINT = 'a final link closes its run''s chain';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

CREATE_TRIGGERS = (
    "CREATE TRIGGER traces_auditrecord_after_final AFTER INSERT ON traces_auditrecord "
    "REFERENCING NEW TABLE AS traces_audit_inserted_records "
    "FOR EACH STATEMENT EXECUTE FUNCTION traces_audit_records_after_final()",
    "CREATE TRIGGER traces_auditrunlink_after_final BEFORE INSERT ON traces_auditrunlink "
    "FOR EACH ROW EXECUTE FUNCTION traces_audit_links_after_final()",
)


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(CREATE_FUNCTIONS, params=None)
    for statement in CREATE_TRIGGERS:
        schema_editor.execute(statement, params=None)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "DROP TRIGGER IF EXISTS traces_auditrecord_after_final ON traces_auditrecord", params=None
    )
    schema_editor.execute(
        "DROP TRIGGER IF EXISTS traces_auditrunlink_after_final ON traces_auditrunlink",
        params=None,
    )
    schema_editor.execute("DROP FUNCTION IF EXISTS traces_audit_records_after_final()")
    schema_editor.execute("DROP FUNCTION IF EXISTS traces_audit_links_after_final()")


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0008_audit_final_run_links"),
    ]

    operations = [
        migrations.RunPython(create_triggers, drop_triggers),
    ]
