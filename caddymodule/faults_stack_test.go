package caddymodule

import (
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// faultsUpSite is the site of the fault tests that need nothing but
// tokentap in front of the misbehaving upstream, under /up/.
const faultsUpSite = `
http://` + faultsProxyAddr + ` {
	bind 127.0.0.1
	handle_path /up/* {
		tokentap
		reverse_proxy ` + faultsUpstreamAddr + `
	}
}
`

// startFaultsExport points the trace pipeline at the fault tests' OTLP port
// and starts the sink there, closed at the end of the test. Every fault
// test reads its spans this way; the order matters, since the sink's
// cleanup must run after Caddy's, so that the spans flushed as Caddy stops
// still find it listening: call this before starting Caddy.
func startFaultsExport(t *testing.T) *otlpsink.Sink {
	t.Helper()
	faultsExportEnv(t, "http://"+faultsOTLPAddr)
	sink := startFaultsSink(t)
	t.Cleanup(sink.Close)
	return sink
}

// startFaultsStack is the usual fault test's setup: the trace export and
// its sink, the misbehaving upstream, and this process's Caddy running site
// in front of it. It returns the sink the spans arrive at and the upstream,
// for the test to say what it does.
func startFaultsStack(t *testing.T, site string) (*otlpsink.Sink, *faultsUpstream) {
	t.Helper()
	sink := startFaultsExport(t)
	up := startFaultsUpstream(t)
	startFaultsCaddy(t, site)
	return sink, up
}
