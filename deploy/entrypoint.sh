#!/bin/sh
# Container entrypoint: one crawling node per container (DESIGN 3).
#
#   crawler-entrypoint              run node N of $CRAWLER_CONFIG; N is $CRAWLER_NODE, or else the
#                                   number at the end of the host name (StatefulSet pod crawler-3 -> 3)
#   crawler-entrypoint health       liveness check: /healthz answers 200, or this node's crawl is over
#   crawler-entrypoint ARGS...      any other crawler command, e.g. `demo` or `run -c FILE --node 1`
#
# Why more than `exec crawler run`: a crawl ends by itself (DESIGN 2.11), but a StatefulSet
# restarts every container that exits, and a restarted node would crawl again from its seeds.
# So when the node stops because the crawl is over (summary "stop" is done, max_pages or
# max_duration) its summary is kept as $CRAWLER_STATE_DIR/finished-node-N.json, and while that
# file exists the node is not started again. CRAWLER_ON_FINISH=idle then keeps the container up
# doing nothing (Kubernetes); `exit` (the default) lets it end (compose, restart: on-failure).
# A node stopped by a signal or a crash leaves no such file: its next start is a plain
# `crawler run` again (docs/operations.md, "Stop and resume").
#
# Environment (all optional):
#   CRAWLER_CONFIG        cluster file                       (default /etc/crawler/cluster.yaml)
#   CRAWLER_NODE          node id; overrides the host name
#   CRAWLER_STATE_DIR     where finished-node-N.json goes    (default /data)
#   CRAWLER_METRICS_PORT  the node's metrics_port, for health (default 9400)
#   CRAWLER_ON_FINISH     exit | idle                        (default exit)
#   CRAWLER_RUN_ARGS      more arguments for `crawler run`, split on spaces (e.g. --fresh)
set -euf

config="${CRAWLER_CONFIG:-/etc/crawler/cluster.yaml}"
state_dir="${CRAWLER_STATE_DIR:-/data}"
metrics_port="${CRAWLER_METRICS_PORT:-9400}"
on_finish="${CRAWLER_ON_FINISH:-exit}"
python="${CRAWLER_PYTHON:-python3}"
crawler="${CRAWLER_BIN:-crawler}"
health_timeout_s=4

say() { echo "crawler-entrypoint: $*" >&2; }

# The node id: $CRAWLER_NODE, else the trailing number of the (short) host name.
node_id() {
    if [ -n "${CRAWLER_NODE:-}" ]; then
        name="CRAWLER_NODE=$CRAWLER_NODE"
        id="$CRAWLER_NODE"
    else
        # shellcheck disable=SC3028  # HOSTNAME comes from the environment (Docker and Kubernetes set it)
        name="${HOSTNAME:-$(cat /proc/sys/kernel/hostname)}"
        short="${name%%.*}"
        id="${short##*-}"
    fi
    case "$id" in
        '' | *[!0-9]*)
            say "cannot tell the node id from '$name': set CRAWLER_NODE, or use a host name ending in -N (StatefulSet pod crawler-N)"
            return 2 ;;
    esac
    echo "$id"
}

# Sleep until told to stop; a finished node's container stays up so it is not restarted.
idle() {
    sleeper=
    trap 'if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null; fi; exit 0' TERM INT
    say "idle; delete $1 to let this node crawl again"
    while :; do
        sleep 3600 &
        sleeper=$!
        wait "$sleeper" || true
    done
}

# True when the JSON summary (last line of the file) says the crawl is over.
crawl_over() {
    "$python" -c 'import json, sys
lines = [line for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
sys.exit(0 if lines and json.loads(lines[-1]).get("stop") in ("done", "max_pages", "max_duration") else 1)' "$1" 2>/dev/null
}

run_node() {
    node=$(node_id) || exit 2
    marker="$state_dir/finished-node-$node.json"
    if [ -f "$marker" ]; then
        say "node $node finished its crawl before ($marker); not starting it again"
        [ "$on_finish" = idle ] && idle "$marker"
        exit 0
    fi
    mkdir -p "$state_dir"
    summary="$state_dir/last-summary-node-$node.json"
    # The node's stdout is its one summary line (progress and logs go to stderr).
    child=
    signalled=0
    trap 'signalled=1; if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; fi' TERM INT
    # shellcheck disable=SC2086  # CRAWLER_RUN_ARGS is a list of words
    "$crawler" run -c "$config" --node "$node" ${CRAWLER_RUN_ARGS:-} >"$summary" &
    child=$!
    if [ "$signalled" = 1 ]; then   # stopped while starting it
        kill -TERM "$child" 2>/dev/null || true
    fi
    status=0
    wait "$child" || status=$?
    # A signal cuts `wait` short while the node is still closing: wait for the node itself.
    while kill -0 "$child" 2>/dev/null; do
        status=0
        wait "$child" || status=$?
    done
    trap - TERM INT
    cat "$summary"
    if crawl_over "$summary"; then
        cp "$summary" "$marker.tmp" && mv "$marker.tmp" "$marker"
        say "node $node: crawl over; summary kept in $marker"
        if [ "$on_finish" = idle ] && [ "$signalled" = 0 ]; then
            idle "$marker"
        fi
    fi
    exit "$status"
}

health() {
    node=$(node_id) || exit 2
    [ -f "$state_dir/finished-node-$node.json" ] && exit 0
    exec "$python" -c 'import sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/healthz"
try:
    with urllib.request.urlopen(url, timeout=float(sys.argv[2])) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as exc:
    sys.exit(f"{url}: {exc}")' "$metrics_port" "$health_timeout_s"
}

case "${1:-}" in
    '') run_node ;;
    health) health ;;
    *) exec "$crawler" "$@" ;;
esac
