package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tokentap/tokentap/internal/simulator"
)

// bufferedConfig puts tokentap in front of the simulator twice: directly
// (/direct/), and through a second reverse_proxy with response_buffers
// unlimited (/held/), which reads the upstream's whole body before it
// sends a byte: the buffering gateway a provider can sit behind.
const bufferedConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
}

http://localhost:9080 {
	handle_path /direct/* {
		tokentap
		reverse_proxy 127.0.0.1:9081
	}
	handle_path /held/* {
		tokentap
		reverse_proxy 127.0.0.1:9082
	}
}

http://:9081 {
	bind 127.0.0.1
	tokentap_simulator
}

http://:9082 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:9081 {
		response_buffers unlimited
	}
}
`

// attrStreamBuffered is spelled out, as the other keys the tests read.
const attrStreamBuffered = attribute.Key("tokentap.stream.buffered")

// bufferedStreams is how many streams TestBufferedThroughCaddy sends per
// profile, format and route.
const bufferedStreams = 3

// TestBufferedThroughCaddy streams the simulator's profiles, from a
// 3-token answer in 40 ms to 48 tokens at 40 a second, in three formats
// (OpenAI chat SSE, Anthropic SSE, Ollama NDJSON), through a real Caddy,
// directly and through a buffering reverse_proxy, 3 streams of each: 72
// streams. No stream that came directly is flagged buffered, and every
// held stream with at least 16 output events is (the held ones with fewer
// are below what the rule judges, and are not). That the held route does
// hold is checked too: its first byte reaches the client only after the
// simulator's schedule has sent the last token.
func TestBufferedThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(bufferedConfig, "caddyfile")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://127.0.0.1:9080/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Caddy does not answer on :9080: %v", err)
		}
	}
	rec := integrationSpans

	profiles := []struct {
		name   string
		ttft   time.Duration
		rate   float64
		tokens int
	}{
		{"3 tokens in 40 ms", 30 * time.Millisecond, 300, 3},
		{"12 tokens at 500 a second", 20 * time.Millisecond, 500, 12},
		{"40 tokens at 200 a second", 100 * time.Millisecond, 200, 40},
		{"48 tokens at 40 a second", 300 * time.Millisecond, 40, 48},
	}
	formats := []struct{ name, path, body string }{
		{"openai chat", "/v1/chat/completions", `{"model":"%s","stream":true,"stream_options":{"include_usage":true},` + simMessages + `}`},
		{"anthropic messages", "/v1/messages", `{"model":"%s","stream":true,"max_tokens":500,` + simMessages + `}`},
		{"ollama chat", "/api/chat", `{"model":"%s",` + simMessages + `}`},
	}
	var tried, flagged, heldJudged int
	for _, p := range profiles {
		for _, f := range formats {
			for _, route := range []string{"direct", "held"} {
				name := p.name + "/" + f.name + "/" + route
				t.Run(name, func(t *testing.T) {
					before := len(rec.Ended())
					schedule := p.ttft + time.Duration(float64(p.tokens-1)/p.rate*float64(time.Second))
					firstBytes := make([]time.Duration, bufferedStreams)
					var wg sync.WaitGroup
					for i := range bufferedStreams {
						wg.Add(1)
						go func() {
							defer wg.Done()
							firstBytes[i] = bufferedRequest(t, tester, "/"+route+f.path, fmt.Sprintf(f.body, bufferedModel(name, i)), map[string]string{
								simulator.HeaderTimeToFirstToken: p.ttft.String(),
								simulator.HeaderTokensPerSecond:  strconv.FormatFloat(p.rate, 'f', -1, 64),
								simulator.HeaderOutputTokens:     strconv.Itoa(p.tokens),
							})
						}()
					}
					wg.Wait()
					spans := waitSpans(t, rec, before+bufferedStreams)
					want := route == "held" && p.tokens >= 16
					for i := range bufferedStreams {
						if route == "held" && firstBytes[i] < schedule {
							t.Errorf("stream %d: first byte at %v through the buffering proxy, before the schedule's last token at %v: it did not hold", i, firstBytes[i], schedule)
						}
						s := spanOfModel(spans[before:], bufferedModel(name, i))
						if s == nil {
							t.Fatalf("no span for stream %d", i)
						}
						a := attrs(s)
						got := a[attrStreamBuffered].AsBool()
						if got != want {
							t.Errorf("stream %d: buffered %v, want %v (time to first token %.4f s, output tokens/s %v, outcome %v)", i, got, want,
								a[attrTimeToFirstToken].AsFloat64(), a[attrOutputTokensPerSecond].Emit(), a[attrOutcome].AsString())
						}
						tried++
						if got {
							flagged++
						}
						if want {
							heldJudged++
						}
					}
				})
			}
		}
	}
	t.Logf("%d streams, %d flagged buffered, %d held with 16 or more output events", tried, flagged, heldJudged)
	if tried != 72 || flagged != heldJudged || heldJudged != 18 {
		t.Errorf("%d streams, %d flagged, %d held to judge; want 72, 18, 18", tried, flagged, heldJudged)
	}
}

// bufferedModel is the request model of stream i of a case, by which its
// span is found among those of the streams sent beside it.
func bufferedModel(name string, i int) string {
	return strings.NewReplacer(" ", "-", "/", "-").Replace(name) + "-" + strconv.Itoa(i)
}

// bufferedRequest posts body through the proxy, reads the whole answer and
// returns when its first byte arrived, from the request's sending.
func bufferedRequest(t *testing.T, tester *caddytest.Tester, path, body string, header map[string]string) time.Duration {
	req, _ := http.NewRequest("POST", "http://localhost:9080"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := tester.Client.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	var first time.Duration
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Error(err)
			return first
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return first
}

// spanOfModel is the span among spans whose request model is model.
func spanOfModel(spans []sdktrace.ReadOnlySpan, model string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if attrs(s)["gen_ai.request.model"].AsString() == model {
			return s
		}
	}
	return nil
}
