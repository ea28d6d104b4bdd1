# The masker's hot modules compiled with mypyc (docs/performance.md, "Figures"). The slim image has no C
# compiler, the full one of the same Python has: compiled here, copied below. If compiling
# fails the build goes on (a warning) and the image runs the pure-Python modules.
FROM python:3.11 AS masking
WORKDIR /app
COPY requirements.txt requirements-build.txt ./
RUN pip install --no-cache-dir -r requirements.txt -r requirements-build.txt
COPY traces/__init__.py traces/
COPY traces/masking traces/masking
COPY scripts/build_masking.py scripts/
RUN python scripts/build_masking.py && mkdir -p build/masking

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HARNESS_VAR_DIR=/app/var

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
COPY --from=masking /app/build/masking build/masking
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --no-input -v0 \
    && useradd --system --home /app harness \
    && chown -R harness /app/var

USER harness
EXPOSE 8000
# ASGI (uvicorn workers), as docker-compose's web: a live event stream holds no thread (docs/runs.md,
# "Live events"); no per-thread persistent connections under ASGI: PostgreSQL connections are
# pooled per process instead (HARNESS_DB_POOL, on by default; docs/configuration.md).
CMD ["sh", "-c", "HARNESS_DB_CONN_MAX_AGE=${HARNESS_DB_CONN_MAX_AGE:-0} exec gunicorn harness.asgi:application -k uvicorn_worker.UvicornWorker --bind 0.0.0.0:8000 --workers 3 --timeout 120"]
