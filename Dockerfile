FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HARNESS_VAR_DIR=/app/var

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --no-input -v0 \
    && useradd --system --home /app harness \
    && chown -R harness /app/var

USER harness
EXPOSE 8000
# ASGI (uvicorn workers), as docker-compose's web: a live event stream holds no thread (README
# "Live events"); no persistent database connections under ASGI unless the operator sets them.
CMD ["sh", "-c", "HARNESS_DB_CONN_MAX_AGE=${HARNESS_DB_CONN_MAX_AGE:-0} exec gunicorn harness.asgi:application -k uvicorn_worker.UvicornWorker --bind 0.0.0.0:8000 --workers 3 --timeout 120"]
