package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsAccessLogMembers are the members of the access log's tokentap
// object and the span attribute each must equal (docs/telemetry.md, "Access
// log fields and placeholders").
var clientsAccessLogMembers = map[string]string{
	"provider":                 "gen_ai.provider.name",
	"operation":                "gen_ai.operation.name",
	"dialect":                  "tokentap.dialect",
	"request_model":            "gen_ai.request.model",
	"response_model":           "gen_ai.response.model",
	"response_id":              "gen_ai.response.id",
	"input_tokens":             "gen_ai.usage.input_tokens",
	"output_tokens":            "gen_ai.usage.output_tokens",
	"usage_source":             "tokentap.usage.source",
	"time_to_first_token":      "tokentap.time_to_first_token",
	"output_tokens_per_second": "tokentap.output_tokens_per_second",
	"outcome":                  "tokentap.outcome",
	"error_type":               "error.type",
	"finish_reasons":           "gen_ai.response.finish_reasons",
}

// TestClientsAccessLog runs requests through the binary with a JSON access
// log and two log_append fields fed by tokentap's placeholders, and checks
// that each request's entry carries the measurement its span has: every
// observed value, under its documented name, and nothing unobserved.
func TestClientsAccessLog(t *testing.T) {
	tok := startClientsTokentap(t, clientsCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")
	tests := []struct {
		name   string
		body   string
		header map[string]string
		// absent are members that must not be in the entry.
		absent []string
		// appended says whether log_append ran: it does not when
		// reverse_proxy aborts the response with a panic, while the
		// access log (and so the tokentap object) is still written.
		appended bool
	}{
		{
			name:     "stream with usage",
			body:     `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			absent:   []string{"error_type"},
			appended: true,
		},
		{
			name:     "stream without usage: estimated",
			body:     `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			absent:   []string{"error_type", "input_tokens"},
			appended: true,
		},
		{
			name:     "error status: no tokens, no time to first token",
			body:     `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			header:   map[string]string{simulator.HeaderStatus: "429"},
			absent:   []string{"input_tokens", "output_tokens", "time_to_first_token", "output_tokens_per_second", "response_model", "finish_reasons"},
			appended: true,
		},
		{
			name:   "upstream cut mid-stream",
			body:   `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			header: map[string]string{simulator.HeaderAbortAfter: "3"},
			// The one choice never finished: finish_reasons ["error"],
			// in the log as on the span.
			absent: []string{"input_tokens"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testbin.NewTrace()
			req, err := http.NewRequest("POST", clientsProxyURL+"/sim/v1/chat/completions", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", tr.Traceparent())
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := (&http.Client{Timeout: clientsRequestTimeout}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body) // a cut stream ends in an error here
			resp.Body.Close()

			span := tok.span(t, tr)
			entry := clientsAccessLogEntry(t, tok.accessLog, tr.ID)
			obj, ok := entry["tokentap"].(map[string]any)
			if !ok {
				t.Fatalf("the access log entry has no tokentap object: %v", entry)
			}
			if obj["span_id"] != span.SpanID {
				t.Errorf("span_id %v, the span's is %s", obj["span_id"], span.SpanID)
			}
			for member, key := range clientsAccessLogMembers {
				want, inSpan := span.Attributes[key]
				got, inLog := obj[member]
				switch {
				case inSpan && !inLog:
					t.Errorf("the access log lacks %s; the span has %s=%v", member, key, want)
				case !inSpan && inLog:
					t.Errorf("the access log has %s=%v; the span has no %s", member, got, key)
				case inSpan && !clientsSameJSON(got, want):
					t.Errorf("the access log has %s=%v, the span %s=%v", member, got, key, want)
				}
			}
			for _, member := range tt.absent {
				if v, ok := obj[member]; ok {
					t.Errorf("the access log has %s=%v, want it absent", member, v)
				}
			}

			// log_append with {http.vars.tokentap.*}: an observed value is
			// logged as it is, an unobserved one as null.
			for field, member := range map[string]string{
				"sdk_output_tokens":       "output_tokens",
				"sdk_time_to_first_token": "time_to_first_token",
			} {
				got, ok := entry[field]
				switch {
				case !tt.appended:
					if ok {
						t.Errorf("log_append ran after an aborted response: %s=%v", field, got)
					}
				case !ok:
					t.Errorf("the entry has no %s from log_append", field)
				case got != obj[member]:
					t.Errorf("log_append's %s = %v, the tokentap object's %s = %v", field, got, member, obj[member])
				}
			}
		})
	}
}

// clientsAccessLogEntry waits for the access log entry of the request whose
// tokentap span is in trace traceID; Caddy writes it after the handler
// chain has returned, so after the client saw the end of the response.
func clientsAccessLogEntry(t *testing.T, path, traceID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(clientsSpanTimeout)
	for {
		data, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var entry map[string]any
			if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
				t.Fatalf("an access log line is not JSON: %v\n%s", err, sc.Bytes())
			}
			if obj, ok := entry["tokentap"].(map[string]any); ok && obj["trace_id"] == traceID {
				return entry
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log entry with tokentap.trace_id %s in %s within %v; the log has:\n%s", traceID, path, clientsSpanTimeout, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientsSameJSON compares a value decoded from the access log's JSON with
// a span attribute as the sink decodes it (int64, float64, string, []any).
func clientsSameJSON(fromLog, fromSpan any) bool {
	if n, ok := fromSpan.(int64); ok {
		f, ok := fromLog.(float64)
		return ok && f == float64(n)
	}
	return fmt.Sprint(fromLog) == fmt.Sprint(fromSpan)
}
