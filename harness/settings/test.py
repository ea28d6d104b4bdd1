"""Test settings: the base settings with the environment's database and broker.

The tier is chosen by the environment exactly as in production: with ``DATABASE_URL`` and
``REDIS_URL`` set the suite runs on PostgreSQL and Redis, without them on SQLite and the
filesystem broker.
"""

from harness.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
