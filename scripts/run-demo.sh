#!/usr/bin/env bash
# Serve the demo on embedded defaults: a Celery worker and the web server, then print how to
# use them. Called by `make run` after migrate and load_demo. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
URL="http://${HOST}:${PORT}"
# Logs and the worker's state go where the data goes (HARNESS_VAR_DIR, as in settings).
VAR=${HARNESS_VAR_DIR:-var}
mkdir -p "$VAR"

# The same key as last time while it still works (kept sealed in var/), else a new one.
KEY_STATE=$($PY manage.py shell -v 0 -c "from harness.demo import demo_api_key
k = demo_api_key()
print(k.secret, 'kept' if k.reused else 'new')")
KEY=${KEY_STATE%% *}
if [ "${KEY_STATE##* }" = kept ]; then
  KEY_NOTE="(tenant acme; the same key as at the last start)"
else
  KEY_NOTE="(tenant acme; NEW key: any earlier make-run key was revoked and answers 401)"
fi

# The demo ticket desk also answers over MCP (tools/mcp/demo_server.py, started over stdio by
# whichever process calls it first). HARNESS_MCP_CONFIG is by default the demo's configuration
# that load_demo writes under var/ (written again here, should var/ be older): this server, the
# worker, and check_tools or run_agent from a plain shell all read the same file. A stdio server
# inherits none of Harness's environment: that file names this interpreter and hands the server
# the database (wherever DATABASE_URL or HARNESS_VAR_DIR put it); a database URL with a
# password stays the secret set here.
export PATH="$PWD/.venv/bin:$PATH"
HARNESS_SECRET_DEMO_DESK_DATABASE_URL=$($PY manage.py shell -v 0 -c \
  "from harness.demo import database_url, write_demo_mcp_config
write_demo_mcp_config(); print(database_url())")
export HARNESS_SECRET_DEMO_DESK_DATABASE_URL
$PY manage.py check_tools >"$VAR/check-tools.log" 2>&1 \
  || echo "check_tools reported problems (MCP drift?): see $VAR/check-tools.log"

# -B: beat inside the worker (recovers stalled runs, retries webhooks) — enough for one host.
# Supervised: started again within seconds whenever it dies (worker.pid: its pid).
scripts/supervise.sh "$VAR/worker.pid" .venv/bin/celery -A harness worker -B \
  --schedule "$VAR/celerybeat-schedule" --loglevel INFO --concurrency 2 >"$VAR/worker.log" 2>&1 &
WORKER=$!
# ASGI (uvicorn workers): live event streams are async and hold no thread each. On PostgreSQL
# each worker pools its connections (HARNESS_DB_POOL, on by default). Everything the server
# writes goes to $VAR: the terminal keeps the banner.
HARNESS_DB_CONN_MAX_AGE=0 .venv/bin/gunicorn harness.asgi:application \
  -k uvicorn_worker.UvicornWorker --bind "${HOST}:${PORT}" --workers 2 \
  --timeout 120 --access-logfile "$VAR/access.log" --error-logfile "$VAR/web.log" >>"$VAR/web.log" 2>&1 &
WEB=$!
trap 'kill $WEB $WORKER 2>/dev/null || true; wait 2>/dev/null || true' EXIT INT TERM

$PY - "$URL" "$VAR" <<'PYEOF'
import sys, time, urllib.request
for _ in range(150):
    try:
        urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit(f"the web server did not come up; see {sys.argv[2]}/web.log")
PYEOF

ADMIN_PASSWORD=${HARNESS_DEMO_ADMIN_PASSWORD:-harness-demo}
cat <<BANNER

  Harness is running (embedded defaults: SQLite, filesystem broker, scripted model).

  API        ${URL}/api/v1/   (docs: ${URL}/api/v1/docs)
  Admin      ${URL}/admin/    login: admin / ${ADMIN_PASSWORD}
  Logs       $VAR/web.log (server), $VAR/access.log (requests), $VAR/worker.log (worker)
  API key    ${KEY}
             ${KEY_NOTE}

  For the README's commands, paste:
  export HARNESS_URL=${URL} HARNESS_KEY=${KEY}

  Demo scenarios (README "Demo scenarios"); each one's trace:
  curl -s ${URL}/api/v1/runs/<id>/trace -H 'Authorization: Bearer ${KEY}'
BANNER

$PY - "$URL" "$KEY" <<'PYEOF'
import json, shlex, sys
url, key = sys.argv[1:3]
for n, s in enumerate(json.load(open("scripts/demo-scenarios.json", encoding="utf-8")), 1):
    body = json.dumps({"agent": "ticket-assistant", "user": s["user"], "input": s["input"]},
                      ensure_ascii=False)
    print(f"  {n}. {s['title']}\n     {s['see']}\n")
    print(f"  curl -s {url}/api/v1/runs -H 'Authorization: Bearer {key}' \\")
    print(f"    -H 'Content-Type: application/json' -d {shlex.quote(body)}\n")
PYEOF
cat <<EXPERIMENT
  Experiments (docs/experiments.md): after the scenarios above, put their ended runs in a
  dataset, run it again with a second scripted model (gateway/scripts/demo-candidate.json,
  which searches first on the parcel question), tools answered from the recording:
  curl -s ${URL}/api/v1/datasets -H 'Authorization: Bearer ${KEY}' -H 'X-Harness-User: alice' \\
    -H 'Content-Type: application/json' -d '{"name": "demo-scenarios", "filter": {"agent": "ticket-assistant"}}'
  curl -s ${URL}/api/v1/experiments -H 'Authorization: Bearer ${KEY}' -H 'X-Harness-User: alice' \\
    -H 'Content-Type: application/json' -d '{"dataset": "demo-scenarios", "candidate": {"model": "scripted:demo-candidate"}}'
  curl -s ${URL}/api/v1/experiments/<id> -H 'Authorization: Bearer ${KEY}'
  Console: ${URL}/admin/experiments/experiment/ (summary, side by side, export)

EXPERIMENT
echo "  Ctrl-C stops the server and the worker."

wait $WEB
