package caddymodule

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"

	"github.com/tokentap/tokentap/internal/probe"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

func TestProbeCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string // the app's JSON
	}{
		{
			name:  "one target, defaults",
			input: "tokentap_probe {\ntarget sim http://localhost:8080/sim/v1 gpt-4o-mini\n}",
			want:  `{"targets":[{"name":"sim","url":"http://localhost:8080/sim/v1","model":"gpt-4o-mini"}]}`,
		},
		{
			name: "settings and a target with api and a block",
			input: `tokentap_probe {
				interval 30s
				timeout 10s
				max_tokens 32
				prompt "Say hello."
				target claude http://localhost:8080/anthropic claude-haiku-4-5 api anthropic {
					header x-api-key {env.ANTHROPIC_API_KEY}
					header X-Team probes
					interval 2m
					timeout 1m
					max_tokens 8
					prompt "Count."
				}
				target gpt http://localhost:8080/openai/v1 gpt-4o-mini api openai
			}`,
			want: `{"interval":30000000000,"timeout":10000000000,"max_tokens":32,"prompt":"Say hello.","targets":[` +
				`{"name":"claude","url":"http://localhost:8080/anthropic","api":"anthropic","model":"claude-haiku-4-5",` +
				`"headers":{"X-Api-Key":["{env.ANTHROPIC_API_KEY}"],"X-Team":["probes"]},` +
				`"interval":120000000000,"timeout":60000000000,"max_tokens":8,"prompt":"Count."},` +
				`{"name":"gpt","url":"http://localhost:8080/openai/v1","api":"openai","model":"gpt-4o-mini"}]}`,
		},
		{
			name: "a header repeated",
			input: `tokentap_probe {
				target a http://h/v1 m {
					header Accept one
					header Accept two
				}
			}`,
			want: `{"targets":[{"name":"a","url":"http://h/v1","model":"m","headers":{"Accept":["one","two"]}}]}`,
		},
		{
			name:  "the bounds themselves",
			input: "tokentap_probe {\ninterval 1s\ntimeout 5m\nmax_tokens 256\ntarget a http://h/v1 m\n}",
			want:  `{"interval":1000000000,"timeout":300000000000,"max_tokens":256,"targets":[{"name":"a","url":"http://h/v1","model":"m"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseProbeOption(caddyfile.NewTestDispenser(tt.input), nil)
			if err != nil {
				t.Fatal(err)
			}
			app, ok := v.(httpcaddyfile.App)
			if !ok || app.Name != "tokentap_probe" {
				t.Fatalf("got %#v, want the tokentap_probe app", v)
			}
			if string(app.Value) != tt.want {
				t.Errorf("JSON\n got %s\nwant %s", app.Value, tt.want)
			}
		})
	}
}

func TestProbeCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"an argument", "tokentap_probe on {\ntarget a http://h/v1 m\n}", "wrong argument count"},
		{"no target", "tokentap_probe {\ninterval 5s\n}", "tokentap_probe needs at least one target"},
		{"empty", `tokentap_probe`, "tokentap_probe needs at least one target"},
		{"target without model", "tokentap_probe {\ntarget a http://h/v1\n}", "target wants <name> <url> <model> [api openai|anthropic]"},
		{"target with a stray word", "tokentap_probe {\ntarget a http://h/v1 m openai\n}", "target wants <name> <url> <model>"},
		{"target with api and no value", "tokentap_probe {\ntarget a http://h/v1 m api\n}", "target wants <name> <url> <model>"},
		{"unknown api", "tokentap_probe {\ntarget a http://h/v1 m api gemini\n}", `target a: api must be "openai" or "anthropic", got "gemini"`},
		{"a word in place of api", "tokentap_probe {\ntarget a http://h/v1 m apis openai\n}", "target wants <name> <url> <model>"},
		{"duplicate target", "tokentap_probe {\ntarget a http://h/v1 m\ntarget a http://h/v1 n\n}", "target a already specified"},
		{"duplicate setting", "tokentap_probe {\ninterval 5s\ninterval 6s\ntarget a http://h/v1 m\n}", "interval already specified"},
		{"duplicate setting in a target", "tokentap_probe {\ntarget a http://h/v1 m {\nmax_tokens 4\nmax_tokens 5\n}\n}", "target a: max_tokens already specified"},
		{"unknown option", "tokentap_probe {\nrate 5\ntarget a http://h/v1 m\n}", "unrecognized tokentap_probe option 'rate'"},
		{"unknown option in a target", "tokentap_probe {\ntarget a http://h/v1 m {\nmodel n\n}\n}", "target a: unrecognized tokentap_probe option 'model'"},
		{"interval without value", "tokentap_probe {\ninterval\ntarget a http://h/v1 m\n}", "interval wants one value"},
		{"interval with two values", "tokentap_probe {\ninterval 1s 2s\ntarget a http://h/v1 m\n}", "interval wants one value"},
		{"interval not a duration", "tokentap_probe {\ninterval often\ntarget a http://h/v1 m\n}", "parsing interval"},
		{"interval under a second", "tokentap_probe {\ninterval 500ms\ntarget a http://h/v1 m\n}", "interval must be at least 1s, got 500ms"},
		{"interval zero", "tokentap_probe {\ninterval 0s\ntarget a http://h/v1 m\n}", "interval must not be 0"},
		{"target interval under a second", "tokentap_probe {\ntarget a http://h/v1 m {\ninterval 10ms\n}\n}", "target a: interval must be at least 1s"},
		{"timeout over the bound", "tokentap_probe {\ntimeout 6m\ntarget a http://h/v1 m\n}", "timeout must be between 0 (the default, 30s) and 5m0s, got 6m0s"},
		{"negative timeout", "tokentap_probe {\ntimeout -1s\ntarget a http://h/v1 m\n}", "timeout must be between 0"},
		{"max_tokens over the bound", "tokentap_probe {\nmax_tokens 257\ntarget a http://h/v1 m\n}", "max_tokens must be between 1 and 256"},
		{"max_tokens zero", "tokentap_probe {\nmax_tokens 0\ntarget a http://h/v1 m\n}", `max_tokens must be an integer from 1 to 256, got "0"`},
		{"max_tokens not a number", "tokentap_probe {\nmax_tokens few\ntarget a http://h/v1 m\n}", `max_tokens must be an integer from 1 to 256, got "few"`},
		{"empty prompt", "tokentap_probe {\nprompt \"\"\ntarget a http://h/v1 m\n}", "prompt must not be empty"},
		{"prompt over the bound", "tokentap_probe {\nprompt " + strings.Repeat("x", probe.MaxPromptBytes+1) + "\ntarget a http://h/v1 m\n}", "prompt must be at most 4096 bytes"},
		{"header without value", "tokentap_probe {\ntarget a http://h/v1 m {\nheader Authorization\n}\n}", "target a: header wants <field> <value>"},
		{"header with three words", "tokentap_probe {\ntarget a http://h/v1 m {\nheader Authorization Bearer k\n}\n}", "target a: header wants <field> <value>"},
		{"the probe header", "tokentap_probe {\ntarget a http://h/v1 m {\nheader tokentap-probe x\n}\n}", "target a: header Tokentap-Probe is the probe's own"},
		{"too many targets", "tokentap_probe {\n" + strings.Repeat("target a http://h/v1 m\n", 1) + manyTargets(probe.MaxTargets) + "}", "at most 64 targets, got 65"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProbeOption(caddyfile.NewTestDispenser(tt.input), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("given twice", func(t *testing.T) {
		_, err := parseProbeOption(caddyfile.NewTestDispenser(`tokentap_probe { target a http://h/v1 m }`), httpcaddyfile.App{})
		if err == nil || !strings.Contains(err.Error(), "tokentap_probe already specified") {
			t.Fatalf("error %v", err)
		}
	})
}

func manyTargets(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("target t" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " http://h/v1 m\n")
	}
	return b.String()
}

// provisionProbeApp provisions the app of cfg, the JSON config.
func provisionProbeApp(t *testing.T, cfg string) (*ProbeApp, error) {
	t.Helper()
	app := new(ProbeApp)
	if err := json.Unmarshal([]byte(cfg), app); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return app, app.Provision(ctx)
}

func TestProbeAppConfig(t *testing.T) {
	t.Setenv("TOKENTAP_PROBE_TEST_KEY", "sk-secret")
	t.Setenv("TOKENTAP_PROBE_TEST_EMPTY", "")
	t.Setenv("TOKENTAP_PROBE_TEST_PORT", "8080")
	app, err := provisionProbeApp(t, `{
		"interval": "5s", "timeout": "3s", "max_tokens": 20, "prompt": "Hi.",
		"targets": [
			{"name": "a", "url": "http://localhost:{env.TOKENTAP_PROBE_TEST_PORT}/v1", "model": "m",
			 "headers": {"Authorization": ["Bearer {env.TOKENTAP_PROBE_TEST_KEY}"]}},
			{"name": "b", "url": "http://localhost/v1", "model": "n", "api": "anthropic", "interval": "2s", "max_tokens": 4, "prompt": "Yo."}
		]}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := app.newProber()
	if err != nil {
		t.Fatal(err)
	}
	got := p.Targets()
	want := []probe.Target{
		{Name: "a", URL: "http://localhost:8080/v1", API: "openai", Model: "m", MaxTokens: 20, Prompt: "Hi.", Interval: 5 * time.Second, Timeout: 3 * time.Second,
			Header: http.Header{"Authorization": {"Bearer sk-secret"}, probe.Header: {probe.Token()}}},
		{Name: "b", URL: "http://localhost/v1", API: "anthropic", Model: "n", MaxTokens: 4, Prompt: "Yo.", Interval: 2 * time.Second, Timeout: 3 * time.Second,
			Header: http.Header{probe.Header: {probe.Token()}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets\n got %+v\nwant %+v", got, want)
	}
}

func TestProbeAppConfigErrors(t *testing.T) {
	t.Setenv("TOKENTAP_PROBE_TEST_KEY", "sk-secret")
	t.Setenv("TOKENTAP_PROBE_TEST_EMPTY", "")
	tests := []struct {
		name, cfg, want string
	}{
		{"empty placeholder in a header", `{"targets":[{"name":"a","url":"http://h/v1","model":"m","headers":{"Authorization":["Bearer {env.TOKENTAP_PROBE_TEST_EMPTY}"]}}]}`,
			`target 0 ("a"): header Authorization: evaluated placeholder {env.TOKENTAP_PROBE_TEST_EMPTY} is empty`},
		{"unknown placeholder in a header", `{"targets":[{"name":"a","url":"http://h/v1","model":"m","headers":{"X-Key":["{http.request.header.X}"]}}]}`,
			`target 0 ("a"): header X-Key: unrecognized placeholder {http.request.header.X}`},
		{"empty placeholder in the URL", `{"targets":[{"name":"a","url":"http://h:{env.TOKENTAP_PROBE_TEST_EMPTY}/v1","model":"m"}]}`,
			`target 0 ("a"): url: evaluated placeholder {env.TOKENTAP_PROBE_TEST_EMPTY} is empty`},
		{"interval under a second", `{"interval":"100ms","targets":[{"name":"a","url":"http://h/v1","model":"m"}]}`, `target 0 ("a"): interval must be at least 1s, got 100ms`},
		{"a target's max_tokens over the bound", `{"targets":[{"name":"a","url":"http://h/v1","model":"m","max_tokens":1000}]}`, "max_tokens must be between 1 and 256"},
		{"no model", `{"targets":[{"name":"a","url":"http://h/v1"}]}`, "a model is required"},
		{"bad URL", `{"targets":[{"name":"a","url":"h/v1","model":"m"}]}`, "url must be an http or https URL with a host"},
		{"duplicate name", `{"targets":[{"name":"a","url":"http://h/v1","model":"m"},{"name":"a","url":"http://h/v1","model":"n"}]}`, `the name "a" is taken`},
		{"the probe header", `{"targets":[{"name":"a","url":"http://h/v1","model":"m","headers":{"Tokentap-Probe":["x"]}}]}`, "header Tokentap-Probe is the probe's own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := provisionProbeApp(t, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("the error quotes a credential: %v", err)
			}
		})
	}
}

// TestProbeLabel sends requests through the handler with and without the
// probe header: only the process's token marks the span, and the header
// never reaches the upstream, whatever its value.
func TestProbeLabel(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	tests := []struct {
		name   string
		header []string // the Tokentap-Probe values sent; nil: none
		probe  bool
	}{
		{"a probe", []string{probe.Token()}, true},
		{"a client request", nil, false},
		{"a forged label", []string{"true"}, false},
		{"another process's token", []string{strings.Repeat("0", 32)}, false},
		{"the token twice", []string{probe.Token(), probe.Token()}, false},
		{"the token and another value", []string{probe.Token(), "x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var upstreamSaw []string
			var upstreamHasAuth bool
			up := streamUpstream(body, nil)
			hs := newHarness(t, &Handler{}, func(w http.ResponseWriter, r *http.Request) error {
				upstreamSaw = r.Header.Values(probe.Header)
				upstreamHasAuth = r.Header.Get("Authorization") == "Bearer k"
				return up(w, r)
			})
			req, _ := http.NewRequest("POST", hs.srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[]}`))
			req.Header.Set("Authorization", "Bearer k")
			for _, v := range tt.header {
				req.Header.Add(probe.Header, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a := attrs(hs.span(t))
			v, ok := a["tokentap.probe"]
			if tt.probe && (!ok || !v.AsBool()) {
				t.Errorf("no tokentap.probe=true on a probe's span")
			}
			if !tt.probe && ok {
				t.Errorf("tokentap.probe=%v on a span that is not a probe's", v.Emit())
			}
			if len(upstreamSaw) > 0 {
				t.Errorf("the upstream saw %s: %q", probe.Header, upstreamSaw)
			}
			if !upstreamHasAuth {
				t.Error("the other headers did not reach the upstream")
			}
		})
	}
}

func TestProbeAccessLogMember(t *testing.T) {
	for _, isProbe := range []bool{true, false} {
		r := &sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Probe: isProbe}
		enc := zapcore.NewMapObjectEncoder()
		if err := newLogEntry(r).MarshalLogObject(enc); err != nil {
			t.Fatal(err)
		}
		v, ok := enc.Fields["probe"]
		if isProbe && v != true || !isProbe && ok {
			t.Errorf("probe %v: the log's probe member is %v (present: %v)", isProbe, v, ok)
		}
		repl := caddy.NewReplacer()
		r.Ctx = context.WithValue(context.Background(), caddy.ReplacerCtxKey, repl)
		accessLog{}.Record(r)
		pv, pok := repl.Get("http.vars.tokentap.probe")
		if isProbe && pv != true || !isProbe && pok {
			t.Errorf("probe %v: {http.vars.tokentap.probe} is %v (present: %v)", isProbe, pv, pok)
		}
	}
}

// TestProbeAppStopsWithProbeInFlight starts and stops the app as reloads
// do, each time with a probe stuck in a stream that never ends: Stop must
// cut it off and leave no goroutine behind.
func TestProbeAppStopsWithProbeInFlight(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	for i := range 3 {
		app, err := provisionProbeApp(t, `{"interval":"1s","targets":[{"name":"`+t.Name()+`","url":"`+srv.URL+`/v1","model":"m"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("config %d: no probe arrived", i)
		}
		if err := app.Stop(); err != nil {
			t.Fatal(err)
		}
		if c, _ := app.prober.Counts(t.Name()); c != (probe.CountsSnapshot{Sent: 1, Canceled: 1}) {
			t.Errorf("config %d: counts %+v, want one probe, canceled", i, c)
		}
	}
	srv.Close()
	goleak.VerifyNone(t, ignore)
}
