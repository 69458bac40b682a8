#!/usr/bin/env bash
# The overhead benchmark (docs/BENCHMARKS.md): builds tokentap, raises the
# open-file limit, and runs test/bench/overhead with the arguments given, e.g.
#   test/bench/overhead.sh                      # the full run, about 6 minutes
#   test/bench/overhead.sh --short              # the CI run, about 2.5 minutes
#   test/bench/overhead.sh --json out.json --profile cpu.pprof
#   test/bench/overhead.sh --record             # the full run, kept as test/bench/results/<date>-<commit>.json
# It listens on 127.0.0.1 only: ports 9350-9353 and 9359, admin 2350-2353.
set -euo pipefail
cd "$(dirname "$0")/../.."

# --record names the results file after the run's date and commit, the
# name docs/BENCHMARKS.md's check (TestBenchmarksDoc) reads it by; a
# results file must describe a commit, so the tree must be clean.
args=()
for a in "$@"; do
	if [ "$a" = --record ]; then
		if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
			echo "--record: commit or stash your changes first: a results file names the commit it measured" >&2
			exit 2
		fi
		mkdir -p test/bench/results
		args+=(--json "test/bench/results/$(date -u +%F)-$(git rev-parse HEAD | cut -c1-12).json")
	else
		args+=("$a")
	fi
done
set -- "${args[@]}"

# 512 streams hold about 1,000 sockets in a proxy and 512 in the client;
# the usual soft limit is 1,024. Go raises its own processes' limit, this
# covers any other runtime and says so when it cannot.
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -gt 65536 ]; then
	hard=65536
fi
ulimit -n "$hard" 2>/dev/null || echo "note: could not raise the open-file limit above $(ulimit -n)" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# TOKENTAP_BINARY names a binary already built from this checkout (.ci/run
# passes its own); without it one is built here.
tokentap=${TOKENTAP_BINARY:-}
if [ -z "$tokentap" ]; then
	tokentap="$tmp/tokentap"
	go build -o "$tokentap" ./cmd/tokentap
fi
go run ./test/bench/overhead --binary "$tokentap" "$@"
