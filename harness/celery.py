"""The one Celery app, configured from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

app = Celery("harness")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
