import os

from django.core.asgi import get_asgi_application

from harness.body_limit import BodyLimit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
# Bodies over the limit are refused before Django's handler spools them (it reads the whole
# body before any middleware or authentication runs): see harness/body_limit.py.
application = BodyLimit(get_asgi_application())
