"""Shared pieces of the engine benchmarks (``bench/loop.py``, ``bench/peers/compare.py``).

Everything here measures Harness from the outside: through ``harness.runs``
(``create_run`` / ``execute_run``), the HTTP API, real Celery workers and gunicorn, and
Django's database connection — never the engine's internals, so the same instruments work
on any engine behind those entry points.
"""
