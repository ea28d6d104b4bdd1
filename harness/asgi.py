import os

import django

from harness.body_limit import BodyLimit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
django.setup(set_prefix=False)

from django.conf import settings  # noqa: E402

from harness.asgi_handler import SyncChainASGIHandler  # noqa: E402 - needs the apps loaded

# Bodies over the limit are refused before Django's handler spools them (it reads the whole
# body before any middleware or authentication runs): see harness/body_limit.py.
application = BodyLimit(SyncChainASGIHandler(request_threads=settings.HARNESS_ASGI_THREADS))
