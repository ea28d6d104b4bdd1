"""The benchmark's round-trip counter: statements, transactions and connections, as the
database sees them, in every thread."""

import threading

import pytest
from django.db import connection, connections, transaction

from bench.support.sql import StatementCounter, classify
from harness.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_statements_in_autocommit_are_transactions_of_their_own():
    counter = StatementCounter()
    with counter.measure() as tally:
        Tenant.objects.filter(slug="nobody").exists()
        Tenant.objects.count()
    assert (tally.statements, tally.pairs, tally.autocommit) == (2, 0, 2)
    assert tally.transactions == 2
    assert tally.round_trips == 2


def test_an_atomic_block_is_one_begin_commit_pair_with_its_statements():
    counter = StatementCounter()
    with counter.measure() as tally:
        with transaction.atomic():
            Tenant.objects.create(slug="t1", name="T1")
            Tenant.objects.create(slug="t2", name="T2")
            Tenant.objects.filter(slug="t1").update(name="One")
        with transaction.atomic():
            Tenant.objects.count()
    assert (tally.statements, tally.pairs, tally.autocommit) == (4, 2, 0)
    assert tally.transactions == 2
    assert tally.round_trips == 4 + 2 * 2
    assert tally.kinds["INSERT harness_tenant"] == 2
    assert tally.kinds["UPDATE harness_tenant"] == 1


def test_a_nested_atomic_block_costs_savepoints_not_a_transaction():
    counter = StatementCounter()
    with counter.measure() as tally, transaction.atomic():
        Tenant.objects.create(slug="t1", name="T1")
        with transaction.atomic():
            Tenant.objects.create(slug="t2", name="T2")
    assert tally.pairs == 1
    assert tally.kinds["SAVEPOINT"] == 2  # SAVEPOINT and RELEASE SAVEPOINT
    assert tally.statements == 4


def test_statements_and_connections_of_other_threads_are_counted():
    counter = StatementCounter()
    errors = []

    def work() -> None:
        try:
            Tenant.objects.count()
        except Exception as error:  # surfaced below, with its cause
            errors.append(error)
        finally:
            connections.close_all()

    connection.ensure_connection()
    with counter.measure() as tally:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert errors == []
    assert tally.statements == 1
    assert tally.connections == 1


def test_nothing_is_counted_outside_a_measure():
    counter = StatementCounter()
    with counter.measure() as tally:
        pass
    Tenant.objects.count()
    assert tally.statements == 0


@pytest.mark.parametrize(
    ("sql", "label"),
    [
        ('INSERT INTO "traces_span" ("a") VALUES (%s)', "INSERT traces_span"),
        ('UPDATE "harness_run" SET "a" = %s', "UPDATE harness_run"),
        ('DELETE FROM "policy_limitslot" WHERE 1', "DELETE policy_limitslot"),
        (
            'SELECT "x"."id" FROM "policy_budgetledger" WHERE 1 FOR UPDATE',
            "SELECT FOR UPDATE policy_budgetledger",
        ),
        ("SELECT version FROM policy_policyversion", "SELECT policy_policyversion"),
        ("SELECT 1", "SELECT (no table)"),
        ('SAVEPOINT "s1"', "SAVEPOINT"),
        ('RELEASE SAVEPOINT "s1"', "SAVEPOINT"),
    ],
)
def test_statements_are_labelled_by_kind_and_table(sql, label):
    assert classify(sql) == label
