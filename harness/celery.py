"""The one Celery app, configured from Django settings (``CELERY_*``)."""

import os

from celery import Celery

from harness import kombu_fix

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

kombu_fix.install()  # a Redis restart must not crash the worker (kombu 5.7.0)

app = Celery("harness")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
