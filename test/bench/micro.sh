#!/usr/bin/env bash
# The micro-benchmarks of tokentap's hot path (docs/BENCHMARKS.md), run
# from a clean checkout and kept as
# test/bench/results/micro-<date>-<commit>.txt, in the format benchstat
# reads, headed by the commit, the date and the load averages it ran at:
#   test/bench/micro.sh              # -count 5
#   test/bench/micro.sh --count 10
# Two such files compare with
#   go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt
set -euo pipefail
cd "$(dirname "$0")/../.."

count=5
if [ "${1:-}" = --count ]; then
	count=$2
fi
case $count in
'' | *[!0-9]*) echo "--count wants a number, got '$count'" >&2; exit 2 ;;
esac
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "commit or stash your changes first: a results file names the commit it measured" >&2
	exit 2
fi
commit=$(git rev-parse HEAD | cut -c1-12)
mkdir -p test/bench/results
out="test/bench/results/micro-$(date -u +%F)-$commit.txt"

# package and benchmark pattern, one pair a line: the per-write and
# per-request cost of the exchange, the whole meter per format and with
# 64 streams' state gone cold, each dialect's event, the live stats'
# record, the metric points of one exchange, and the SSE decoder.
benches=(
	"./internal/exchange" 'BenchmarkWrite$|BenchmarkExchange$|BenchmarkFinish$|BenchmarkRequestSetup$'
	"./test/bench/meterbench" 'BenchmarkMeter$|BenchmarkMeterInterleaved$'
	"./internal/meter" 'Event$|EventEscapes$|Stream$'
	"./internal/stats" 'BenchmarkRecord$'
	"./internal/otelexport" 'BenchmarkRecordMetrics$'
	"./sse" 'BenchmarkDecoder$'
)

{
	echo "commit: $commit"
	echo "date: $(date -u +%FT%TZ)"
	echo "loadavg-start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "count: $count"
	for ((i = 0; i < ${#benches[@]}; i += 2)); do
		go test -run '^$' -bench "${benches[i+1]}" -benchmem -count "$count" "${benches[i]}"
	done
	echo "loadavg-end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out" >&2
