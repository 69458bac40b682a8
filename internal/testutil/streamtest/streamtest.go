// Package streamtest holds what the in-process tests of one exchange share,
// in package exchange and in the Caddy module above it: a streaming
// upstream that writes as reverse_proxy does, a client request, the span's
// attributes by key, and the goroutine-leak check.
package streamtest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
)

// CheckLeaks fails t if goroutines started during the test outlive it, for
// example a measurement left running after an aborted stream. Goroutines
// already running (a Caddy started by an earlier test) are ignored.
func CheckLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
}

// Post sends body to url's chat completions path.
func Post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Upstream writes body as reverse_proxy does: headers, then each piece
// between cuts followed by a flush.
func Upstream(body []byte, cuts []int) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		prev := 0
		for _, c := range append(cuts, len(body)) {
			if _, err := w.Write(body[prev:c]); err != nil {
				return err
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return err
			}
			prev = c
		}
		return nil
	}
}

// Attrs is a span's attributes by key.
func Attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}
