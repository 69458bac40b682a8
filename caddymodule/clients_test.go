package caddymodule

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestClientLeavesAfterTerminator reproduces what the official SDKs do:
// openai-go and the openai npm package close the response as soon as they
// read data: [DONE], usually before the proxy has read the upstream's end of
// the body, and reverse_proxy then aborts (its upstream read is cancelled
// with the request). The client got the whole answer, so the exchange is
// completed, not client_abort; a client that leaves before the terminator
// still is client_abort. test/e2e/clients_openai_test.go met this with the real
// SDK.
func TestClientLeavesAfterTerminator(t *testing.T) {
	full := fixture(t, "chat_usage.sse")
	beforeDone := full[:bytes.Index(full, []byte("data: [DONE]"))]
	tests := []struct {
		name        string
		body        []byte
		wantOutcome string
		wantError   string
	}{
		{"left after data: [DONE]", full, "completed", ""},
		{"left before data: [DONE]", beforeDone, "client_abort", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHarness(t, &Handler{}, func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(tt.body)
				_ = http.NewResponseController(w).Flush()
				// The upstream's end has not been read yet when the
				// client leaves; reverse_proxy's read is then
				// cancelled, and it aborts the response.
				<-r.Context().Done()
				panic(http.ErrAbortHandler)
			})
			resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}`)
			// Read event by event, as an SDK does, and leave after the
			// last event the upstream sent.
			last := bytes.TrimSpace(tt.body[bytes.LastIndex(bytes.TrimSpace(tt.body), []byte("\n\n"))+2:])
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() && !bytes.Equal(sc.Bytes(), last) {
			}
			resp.Body.Close()

			a := attrs(hs.span(t))
			if got := a[attrOutcome].AsString(); got != tt.wantOutcome {
				t.Errorf("outcome %q, want %q", got, tt.wantOutcome)
			}
			if got := a["error.type"].AsString(); got != tt.wantError {
				t.Errorf("error.type %q, want %q", got, tt.wantError)
			}
		})
	}
}
