"""App config for casbin-django-orm-adapter's ``CasbinRule`` table.

The adapter's own AppConfig loads an enforcer from the database in ``ready()``, that is on
every start-up, including ``migrate`` on an empty database. We only want its model and
migration: the policy engine loads rules itself, when a decision is first needed.
"""

from django.apps import AppConfig


class CasbinRulesConfig(AppConfig):
    name = "casbin_adapter"
    label = "casbin_adapter"
    verbose_name = "Casbin policy rules"
    # The adapter's shipped migration uses AutoField; keep makemigrations --check quiet.
    default_auto_field = "django.db.models.AutoField"
