package caddymodule

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tokentap/tokentap/internal/recording"
)

func TestUnmarshalRecord(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *RecordConfig
		wantErr  string
	}{
		{"file only", "record traffic.jsonl", &RecordConfig{Path: "traffic.jsonl"}, ""},
		{"rotation", "record /var/log/t.jsonl roll_size 50MiB roll_keep 3", &RecordConfig{Path: "/var/log/t.jsonl", RollSize: 50 << 20, RollKeep: 3}, ""},
		{"no file", "record", nil, "wrong argument count"},
		{"size without value", "record f roll_size", nil, "roll_size needs a value"},
		{"bad size", "record f roll_size lots", nil, `roll_size "lots" is not a size`},
		{"zero size", "record f roll_size 0", nil, "is not a size"},
		{"bad keep", "record f roll_keep -1", nil, `roll_keep "-1" is not a whole number`},
		{"keep not a number", "record f roll_keep 2x", nil, "is not a whole number"},
		{"unknown setting", "record f compress on", nil, `unknown setting "compress"`},
		{"setting twice", "record f roll_keep 2 roll_keep 3", nil, "roll_keep given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tokentap {\n" + tc.in + "\n}"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.Record, tc.want) {
				t.Errorf("got %+v, want %+v", h.Record, tc.want)
			}
		})
	}
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tokentap {\nrecord a\nrecord b\n}")); err == nil || !strings.Contains(err.Error(), "record already specified") {
		t.Errorf("record twice: %v", err)
	}
}

// recordConfig records the simulator's traffic, with its prompts, to
// {file}.
const recordConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /sim/* {
		tokentap {
			record {file}
			capture_content on
		}
		reverse_proxy 127.0.0.1:9081
	}
}

http://:9081 {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 500
		output_tokens 12
	}
}
`

// TestRecordThroughCaddy: requests through a real Caddy land in the
// recording as the proxy measured them, across a reload, which keeps the
// file open and loses no line.
func TestRecordThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	file := filepath.Join(t.TempDir(), "traffic.jsonl")
	cfg := strings.ReplaceAll(recordConfig, "{file}", file)
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(cfg, "caddyfile")
	send := func(model string, header map[string]string) {
		t.Helper()
		resp, err := tester.Client.Do(simRequest(t, `{"model":"`+model+`","stream":true,"max_tokens":64,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"record me"}]}`, header))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	began := time.Now()
	send("rec-a", nil)
	send("rec-b", map[string]string{"Tokentap-Sim-Status": "429"})
	// A reload to the same config: the recording stays open.
	tester.InitServer(cfg, "caddyfile")
	send("rec-a", map[string]string{"Tokentap-Sim-Tokens-Per-Second": "100"})

	var lines []recording.Line
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f, err := os.Open(file)
		if err == nil {
			lines, _, err = recording.Read(f)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines in the recording, want 3", len(lines))
	}
	for i, want := range []struct {
		model, outcome string
		status         int
		output         int64
	}{{"rec-a", "completed", 200, 12}, {"rec-b", "throttled", 429, -1}, {"rec-a", "completed", 200, 12}} {
		l := lines[i]
		if l.Model != want.model || l.Outcome != want.outcome || l.Status != want.status || l.OutputTokens != want.output {
			t.Errorf("line %d: model %s, outcome %s, status %d, output %d; want %+v", i, l.Model, l.Outcome, l.Status, l.OutputTokens, want)
		}
		if l.Route != "/sim/v1/chat/completions" || l.API != "openai_chat" || !l.Stream || l.MaxTokens != 64 {
			t.Errorf("line %d: route %q, api %q, stream %v, max tokens %d", i, l.Route, l.API, l.Stream, l.MaxTokens)
		}
		if l.Start.Before(began.Add(-time.Second)) || l.Start.After(time.Now()) {
			t.Errorf("line %d: start %v, not during the test", i, l.Start)
		}
		if want.status == 200 && (!strings.Contains(string(l.Input), "record me") || l.TimeToFirstToken < 0.015 || l.InputTokens < 1) {
			t.Errorf("line %d: input %s, ttft %v, input tokens %d", i, l.Input, l.TimeToFirstToken, l.InputTokens)
		}
	}
	// The simulator's per-request speed reached the recorded rate: 500
	// tokens/s, then 100.
	if a, b := lines[0].OutputTokensPerSecond, lines[2].OutputTokensPerSecond; a < 300 || b < 80 || b > 120 {
		t.Errorf("recorded tokens/s %.1f and %.1f, want about 500 and 100", a, b)
	}
}

// TestRecordFileNotWritable: a recording that cannot be opened fails the
// config, with the file named.
func TestRecordFileNotWritable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	h := &Handler{Record: &RecordConfig{Path: filepath.Join(blocker, "traffic.jsonl")}}
	err := h.Provision(ctx)
	defer h.Cleanup()
	if err == nil || !strings.Contains(err.Error(), "record ") || !strings.Contains(err.Error(), "traffic.jsonl") {
		t.Errorf("provisioning a recording under a regular file: %v", err)
	}
}
