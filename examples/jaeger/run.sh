#!/usr/bin/env bash
# Runs Jaeger v2 and tokentap (with its built-in simulator) on this machine,
# tokentap exporting every measured request to Jaeger as a span, until
# Ctrl-C. No Docker: Jaeger is built from its Go module in test/tools/jaeger (the
# first build takes about ten minutes, later ones seconds).
#
# Usage, from anywhere in the repository:
#
#   examples/jaeger/run.sh
#
# Then send requests to http://localhost:8080/sim/... (see README.md here)
# and read the traces from Jaeger's query API on http://localhost:16686.
#
# Environment (all optional):
#   JAEGER_BINARY     a Jaeger v2 binary to run instead of building test/tools/jaeger
#   TOKENTAP_BINARY   a tokentap binary to run instead of building ./cmd/tokentap
#   TOKENTAP_PORT     tokentap's HTTP port (8080)
#   SIMULATOR_PORT    the simulator's port (8081)
#   TOKENTAP_ADMIN    Caddy's admin address (localhost:2019)
#   JAEGER_OTLP_GRPC, JAEGER_OTLP_HTTP, JAEGER_QUERY_HTTP, JAEGER_QUERY_GRPC,
#   JAEGER_HEALTH     Jaeger's addresses (127.0.0.1 with ports 4317, 4318,
#                     16686, 16685, 13133), read by jaeger.yaml
#   OTEL_SERVICE_NAME the service the spans are filed under (tokentap)
#   OTEL_BSP_SCHEDULE_DELAY  how often tokentap sends its spans, in ms (1000
#                     here, so that a trace shows up about a second after its
#                     request; the SDK's default is 5000)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

: "${TOKENTAP_PORT:=8080}" "${SIMULATOR_PORT:=8081}" "${TOKENTAP_ADMIN:=localhost:2019}"
: "${JAEGER_OTLP_GRPC:=127.0.0.1:4317}" "${JAEGER_OTLP_HTTP:=127.0.0.1:4318}"
: "${JAEGER_QUERY_HTTP:=127.0.0.1:16686}" "${JAEGER_QUERY_GRPC:=127.0.0.1:16685}"
: "${JAEGER_HEALTH:=127.0.0.1:13133}"
: "${OTEL_SERVICE_NAME:=tokentap}" "${OTEL_BSP_SCHEDULE_DELAY:=1000}"
export TOKENTAP_PORT SIMULATOR_PORT TOKENTAP_ADMIN \
	JAEGER_OTLP_GRPC JAEGER_OTLP_HTTP JAEGER_QUERY_HTTP JAEGER_QUERY_GRPC JAEGER_HEALTH \
	OTEL_SERVICE_NAME OTEL_BSP_SCHEDULE_DELAY

say() { printf 'run.sh: %s\n' "$*" >&2; }

if [ -z "${JAEGER_BINARY:-}" ]; then
	say "building Jaeger v2 from test/tools/jaeger (about ten minutes the first time)"
	# `go tool -n` builds the tool into Go's build cache and prints where,
	# so this and `go -C test/tools/jaeger tool jaeger` share one build.
	JAEGER_BINARY=$(go -C "$root/test/tools/jaeger" tool -n jaeger)
fi
if [ -z "${TOKENTAP_BINARY:-}" ]; then
	say "building tokentap"
	bindir=$(mktemp -d)
	TOKENTAP_BINARY=$bindir/tokentap
	go -C "$root" build -o "$TOKENTAP_BINARY" ./cmd/tokentap
fi

# Caddy saves its last config and its certificates under these; a demo
# leaves the user's own alone.
state=$(mktemp -d)
jaeger_pid= tokentap_pid=
stop() {
	trap - EXIT INT TERM
	# tokentap first, so that its last spans are sent while Jaeger listens.
	# (SIGTERM: a second SIGINT, after the terminal's, would make Caddy
	# quit without flushing.)
	if [ -n "$tokentap_pid" ]; then kill -TERM "$tokentap_pid" 2>/dev/null || true; wait "$tokentap_pid" 2>/dev/null || true; fi
	if [ -n "$jaeger_pid" ]; then kill -TERM "$jaeger_pid" 2>/dev/null || true; wait "$jaeger_pid" 2>/dev/null || true; fi
	rm -rf "$state" ${bindir:+"$bindir"}
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# answers URL: true once something answers HTTP there, whatever the status.
answers() { curl -s -o /dev/null --max-time 1 "$1"; }

# wait_for NAME PID URL: waits until URL answers, failing if the process
# exits first or 60 s pass.
wait_for() {
	for _ in $(seq 600); do
		if answers "$3"; then return 0; fi
		if ! kill -0 "$2" 2>/dev/null; then say "$1 exited during startup"; exit 1; fi
		sleep 0.1
	done
	say "$1 did not answer on $3 within 60 s"
	exit 1
}

# A program left running on these ports would answer in place of the new
# ones and hide their failure to start.
for url in "http://$JAEGER_HEALTH/" "http://$JAEGER_QUERY_HTTP/" "http://127.0.0.1:$TOKENTAP_PORT/" "http://127.0.0.1:$SIMULATOR_PORT/"; do
	if answers "$url"; then say "something already answers on $url; stop it first"; exit 1; fi
done

"$JAEGER_BINARY" --config "$here/jaeger.yaml" &
jaeger_pid=$!
wait_for Jaeger "$jaeger_pid" "http://$JAEGER_HEALTH/status"

OTEL_EXPORTER_OTLP_ENDPOINT="http://$JAEGER_OTLP_GRPC" \
	OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
	XDG_CONFIG_HOME="$state/config" XDG_DATA_HOME="$state/data" \
	"$TOKENTAP_BINARY" run --config "$here/Caddyfile" --adapter caddyfile &
tokentap_pid=$!
wait_for tokentap "$tokentap_pid" "http://127.0.0.1:$TOKENTAP_PORT/"

say "ready: tokentap on http://localhost:$TOKENTAP_PORT/sim/ and /traced/, Jaeger's query API on http://$JAEGER_QUERY_HTTP/api/v3/; Ctrl-C stops both"
# Until Ctrl-C, or until either program stops on its own. (A polling loop,
# not `wait -n`, which the bash of macOS lacks.)
while kill -0 "$jaeger_pid" 2>/dev/null && kill -0 "$tokentap_pid" 2>/dev/null; do
	sleep 1
done
say "Jaeger or tokentap exited on its own; stopping the other"
exit 1
