#!/usr/bin/env bash
# Runs, on this machine, tokentap past one instance:
#
#   client -> load balancer (Caddy) -> tokentap A ┐            ┌-> Jaeger (traces)
#                                   -> tokentap B ┴-> Collector ┤
#                                                              └-> Prometheus endpoint (metrics)
#
# with the simulator as the LLM provider, until Ctrl-C. All real programs:
# tokentap (three times: two instances and the load balancer, which is the
# same Caddy binary), an OpenTelemetry Collector built from test/tools/otelcol,
# and Jaeger v2 built from test/tools/jaeger. No Docker.
#
# Usage, from anywhere in the repository:
#
#   examples/collector/run.sh
#
# Environment (all optional; addresses are on 127.0.0.1):
#   JAEGER_BINARY, OTELCOL_BINARY, TOKENTAP_BINARY   prebuilt binaries, to
#                     skip the builds (Jaeger's first takes about ten minutes)
#   LB_PORT (8080), LB_ADMIN (localhost:2019)         the load balancer
#   TOKENTAP_A_PORT (8091), TOKENTAP_A_ADMIN (localhost:2020),
#   TOKENTAP_B_PORT (8092), TOKENTAP_B_ADMIN (localhost:2021)  the instances
#   SIMULATOR_PORT (8081)                             the simulated provider
#   OTELCOL_OTLP_GRPC (127.0.0.1:4317), OTELCOL_OTLP_HTTP (127.0.0.1:4318),
#   OTELCOL_HEALTH (127.0.0.1:13134), PROMETHEUS_ENDPOINT (127.0.0.1:8889)
#                     the Collector, read by otelcol.yaml
#   JAEGER_OTLP_GRPC (127.0.0.1:4417), JAEGER_OTLP_HTTP (127.0.0.1:4418),
#   JAEGER_QUERY_HTTP (127.0.0.1:16686), JAEGER_QUERY_GRPC (127.0.0.1:16685),
#   JAEGER_HEALTH (127.0.0.1:13133)   Jaeger, read by ../jaeger/jaeger.yaml
#                     (its OTLP ports moved off 4317/4318, the Collector's)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

: "${LB_PORT:=8080}" "${LB_ADMIN:=localhost:2019}" "${SIMULATOR_PORT:=8081}"
: "${TOKENTAP_A_PORT:=8091}" "${TOKENTAP_A_ADMIN:=localhost:2020}"
: "${TOKENTAP_B_PORT:=8092}" "${TOKENTAP_B_ADMIN:=localhost:2021}"
: "${OTELCOL_OTLP_GRPC:=127.0.0.1:4317}" "${OTELCOL_OTLP_HTTP:=127.0.0.1:4318}"
: "${OTELCOL_HEALTH:=127.0.0.1:13134}" "${PROMETHEUS_ENDPOINT:=127.0.0.1:8889}"
: "${JAEGER_OTLP_GRPC:=127.0.0.1:4417}" "${JAEGER_OTLP_HTTP:=127.0.0.1:4418}"
: "${JAEGER_QUERY_HTTP:=127.0.0.1:16686}" "${JAEGER_QUERY_GRPC:=127.0.0.1:16685}"
: "${JAEGER_HEALTH:=127.0.0.1:13133}"
export LB_PORT LB_ADMIN SIMULATOR_PORT TOKENTAP_A_PORT TOKENTAP_B_PORT \
	OTELCOL_OTLP_GRPC OTELCOL_OTLP_HTTP OTELCOL_HEALTH PROMETHEUS_ENDPOINT \
	JAEGER_OTLP_GRPC JAEGER_OTLP_HTTP JAEGER_QUERY_HTTP JAEGER_QUERY_GRPC JAEGER_HEALTH

say() { printf 'run.sh: %s\n' "$*" >&2; }

bindir=$(mktemp -d)
# Caddy saves its last config and its certificates under XDG_*_HOME; each
# Caddy here gets its own, and the user's are left alone.
state=$(mktemp -d)

if [ -z "${JAEGER_BINARY:-}" ]; then
	say "building Jaeger v2 from test/tools/jaeger (about ten minutes the first time)"
	# Into Go's build cache, shared with `go -C test/tools/jaeger tool jaeger`.
	JAEGER_BINARY=$(go -C "$root/test/tools/jaeger" tool -n jaeger)
fi
if [ -z "${OTELCOL_BINARY:-}" ]; then
	say "building the OpenTelemetry Collector from test/tools/otelcol"
	OTELCOL_BINARY=$bindir/otelcol
	go -C "$root/test/tools/otelcol" build -o "$OTELCOL_BINARY" .
fi
if [ -z "${TOKENTAP_BINARY:-}" ]; then
	say "building tokentap"
	TOKENTAP_BINARY=$bindir/tokentap
	go -C "$root" build -o "$TOKENTAP_BINARY" ./cmd/tokentap
fi

# The programs started, in order; stopped in reverse order, so that each
# sends what it holds to the next one while that one still listens.
pids=() names=()
stop() {
	trap - EXIT INT TERM
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
	rm -rf "$state" "$bindir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# answers URL: true once something answers HTTP there, whatever the status.
answers() { curl -s -o /dev/null --max-time 1 "$1"; }

# start NAME URL COMMAND...: starts COMMAND in the background and waits
# until URL answers, failing if it exits first or 60 s pass.
start() {
	local name=$1 url=$2
	shift 2
	"$@" &
	pids+=($!) names+=("$name")
	for _ in $(seq 600); do
		if answers "$url"; then return 0; fi
		if ! kill -0 "${pids[${#pids[@]} - 1]}" 2>/dev/null; then say "$name exited during startup"; exit 1; fi
		sleep 0.1
	done
	say "$name did not answer on $url within 60 s"
	exit 1
}

# A program left running on these ports would answer in place of the new
# ones and hide their failure to start.
for url in "http://$JAEGER_HEALTH/" "http://$JAEGER_QUERY_HTTP/" "http://$OTELCOL_HEALTH/" "http://$PROMETHEUS_ENDPOINT/" \
	"http://127.0.0.1:$LB_PORT/" "http://127.0.0.1:$SIMULATOR_PORT/" \
	"http://127.0.0.1:$TOKENTAP_A_PORT/" "http://127.0.0.1:$TOKENTAP_B_PORT/"; do
	if answers "$url"; then say "something already answers on $url; stop it first"; exit 1; fi
done

start Jaeger "http://$JAEGER_HEALTH/status" \
	"$JAEGER_BINARY" --config "$root/examples/jaeger/jaeger.yaml"
start Collector "http://$OTELCOL_HEALTH/status" \
	"$OTELCOL_BINARY" --config "$here/otelcol.yaml"

# tokentap NAME PORT ADMIN: one instance, exporting to the Collector.
tokentap() {
	start "tokentap $1" "http://127.0.0.1:$2/" env \
		TOKENTAP_PORT="$2" TOKENTAP_ADMIN="$3" \
		OTEL_EXPORTER_OTLP_ENDPOINT="http://$OTELCOL_OTLP_GRPC" \
		OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
		OTEL_SERVICE_NAME="${OTEL_SERVICE_NAME:-tokentap}" \
		OTEL_RESOURCE_ATTRIBUTES="service.instance.id=tokentap-$1" \
		OTEL_BSP_SCHEDULE_DELAY="${OTEL_BSP_SCHEDULE_DELAY:-1000}" \
		XDG_CONFIG_HOME="$state/$1/config" XDG_DATA_HOME="$state/$1/data" \
		"$TOKENTAP_BINARY" run --config "$here/tokentap.Caddyfile" --adapter caddyfile
}
tokentap a "$TOKENTAP_A_PORT" "$TOKENTAP_A_ADMIN"
tokentap b "$TOKENTAP_B_PORT" "$TOKENTAP_B_ADMIN"

start "load balancer" "http://127.0.0.1:$LB_PORT/" env \
	XDG_CONFIG_HOME="$state/lb/config" XDG_DATA_HOME="$state/lb/data" \
	"$TOKENTAP_BINARY" run --config "$here/lb.Caddyfile" --adapter caddyfile

say "ready: requests to http://localhost:$LB_PORT/sim/..., traces on http://$JAEGER_QUERY_HTTP/api/v3/, metrics on http://$PROMETHEUS_ENDPOINT/metrics; Ctrl-C stops all"
# Until Ctrl-C, or until a program stops on its own.
while true; do
	for i in "${!pids[@]}"; do
		if ! kill -0 "${pids[i]}" 2>/dev/null; then
			say "${names[i]} exited on its own; stopping the others"
			exit 1
		fi
	done
	sleep 1
done
