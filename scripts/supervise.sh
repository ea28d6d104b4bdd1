#!/usr/bin/env bash
# Keep a process running: start it again whenever it exits, whatever killed it (an OOM kill,
# a crash on a broker restart). `make run` (scripts/run-demo.sh) runs its Celery worker under
# it; docker-compose restarts containers itself (`restart: unless-stopped`).
#
#   scripts/supervise.sh PIDFILE COMMAND [ARGS...]
#
# PIDFILE holds the running child's pid. A child that lived less than 10 s is started again
# after a growing pause (1, 2, 4 … 30 s), so a process that cannot start does not spin.
# SIGTERM or SIGINT stops the child (SIGTERM: Celery's warm shutdown) and the supervisor.
set -uo pipefail
pidfile=$1
shift
child=""

stop() {
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  rm -f "$pidfile"
  exit 0
}
trap stop TERM INT

pause=1
while true; do
  started=$SECONDS
  "$@" &
  child=$!
  echo "$child" >"$pidfile"
  wait "$child"
  status=$?
  child=""
  if [ $((SECONDS - started)) -ge 10 ]; then pause=1; fi
  echo "supervise: $1 exited (status $status); starting it again in ${pause} s" >&2
  sleep "$pause" &
  wait $!
  pause=$((pause * 2 > 30 ? 30 : pause * 2))
done
