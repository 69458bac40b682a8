package probe

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const openAIStream = "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"1\"}}]}\n\n" +
	"data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\n" +
	"data: [DONE]\n\n"

// seen is what a fake upstream saw of a probe.
type seen struct {
	path   string
	header http.Header
	body   map[string]any
}

func upstream(t *testing.T, status int, body string) (*httptest.Server, chan seen) {
	t.Helper()
	ch := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{path: r.URL.Path, header: r.Header.Clone()}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &s.body)
		ch <- s
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestHTTPSender(t *testing.T) {
	tests := []struct {
		name      string
		api       string
		path      string
		status    int
		body      string
		wantPath  string
		wantErr   string
		wantField string
	}{
		{"openai base URL", OpenAI, "/openai/v1", 200, openAIStream, "/openai/v1/chat/completions", "", "max_completion_tokens"},
		{"openai full endpoint", OpenAI, "/v1/chat/completions", 200, openAIStream, "/v1/chat/completions", "", "max_completion_tokens"},
		{"anthropic host", Anthropic, "", 200,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"c\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"1\"}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			"/v1/messages", "", "max_tokens"},
		{"error status", OpenAI, "/v1", 503, `{"error":{"message":"overloaded"}}`, "/v1/chat/completions", `http_503: {"error":{"message":"overloaded"}}`, ""},
		{"stream without its end", OpenAI, "/v1", 200, "data: {\"choices\":[{\"delta\":{\"content\":\"1\"}}]}\n\n", "/v1/chat/completions", "truncated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, ch := upstream(t, tt.status, tt.body)
			s := NewHTTPSender(nil)
			defer s.CloseIdleConnections()
			tgt := Target{Name: "x", URL: srv.URL + tt.path, API: tt.api, Model: "m", MaxTokens: 16, Prompt: "p", Timeout: 5 * time.Second,
				Header: http.Header{"Authorization": {"Bearer k"}, Header: {Token()}}}
			err := s.Send(context.Background(), &tgt)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			got := <-ch
			if got.path != tt.wantPath {
				t.Errorf("path %s, want %s", got.path, tt.wantPath)
			}
			if got.header.Get(Header) != Token() || got.header.Get("Authorization") != "Bearer k" {
				t.Errorf("headers %v", got.header)
			}
			if tt.wantField != "" && (got.body[tt.wantField] != float64(16) || got.body["model"] != "m" || got.body["stream"] != true) {
				t.Errorf("body %v: want model m, stream and %s 16", got.body, tt.wantField)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, detail, url, want string
	}{
		{"query", `Post "http://h/v1?key=sk-1": refused`, "http://h/v1?key=sk-1", `Post "http://h/v1?REDACTED": refused`},
		{"user info", `Post "http://u:pw@h/v1": refused`, "http://u:pw@h/v1", `Post "http://REDACTED@h/v1": refused`},
		{"long", strings.Repeat("x", 300), "http://h", strings.Repeat("x", maxErrorDetail) + "…"},
		{"nothing to take out", "refused", "http://h/v1", "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redact(tt.detail, tt.url); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStopWithProbeInFlight stops a prober whose probe is stuck in a
// stream that never ends: Stop must cut it off and leave no goroutine of
// the prober or its HTTP client behind.
func TestStopWithProbeInFlight(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"1\"}}]}\n\n")
		w.(http.Flusher).Flush()
		close(arrived)
		<-r.Context().Done()
	}))
	tgt := Target{Name: t.Name(), URL: srv.URL + "/v1", Model: "m", Interval: time.Hour}
	p, err := New([]Target{tgt}, Options{Offset: func(time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not arrive")
	}
	done := make(chan struct{})
	go func() { p.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return with a probe in flight")
	}
	c, _ := p.Counts(tgt.Name)
	if c != (CountsSnapshot{Sent: 1, Canceled: 1}) {
		t.Errorf("counts %+v, want one sent and canceled", c)
	}
	srv.Close()
	goleak.VerifyNone(t, ignore)
}
