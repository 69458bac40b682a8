package simulator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func intp(n int) *int { return &n }

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		input   string
		want    Handler
		wantErr string
	}{
		{
			name:  "bare directive",
			input: `tokentap_simulator`,
		},
		{
			name:  "empty block",
			input: "tokentap_simulator {\n}",
		},
		{
			name: "all top-level subdirectives",
			input: `tokentap_simulator {
				time_to_first_token 150ms
				tokens_per_second 80.5
				jitter 0.25
				output_tokens 32
				rate_limit_requests 60
				usage always
				seed -7
				fail_status 503
				fail_status_body none
				error_after 0
				truncate_after 5
				abort_after 9
			}`,
			want: Handler{
				Profile: Profile{
					TimeToFirstToken:  caddy.Duration(150 * time.Millisecond),
					TokensPerSecond:   80.5,
					Jitter:            0.25,
					OutputTokens:      32,
					RateLimitRequests: 60,
				},
				Usage:          UsageAlways,
				Seed:           -7,
				FailStatus:     503,
				FailStatusBody: StatusBodyNone,
				ErrorAfter:     intp(0),
				TruncateAfter:  intp(5),
				AbortAfter:     intp(9),
			},
		},
		{
			name: "two models of known speeds",
			input: `tokentap_simulator {
				tokens_per_second 50
				model model-a {
					time_to_first_token 100ms
					tokens_per_second 40
				}
				model model-b {
					tokens_per_second 120
					jitter 0.1
					output_tokens 16
					batch_slowdown 0.05
					prefill_tokens_per_second 8000
				}
			}`,
			want: Handler{
				Profile: Profile{TokensPerSecond: 50},
				Models: map[string]Profile{
					"model-a": {TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 40},
					"model-b": {TokensPerSecond: 120, Jitter: 0.1, OutputTokens: 16, BatchSlowdown: 0.05, PrefillTokensPerSecond: 8000},
				},
			},
		},
		{
			name:  "model without block",
			input: "tokentap_simulator {\nmodel gpt-4o\n}",
			want:  Handler{Models: map[string]Profile{"gpt-4o": {}}},
		},
		{name: "directive argument", input: `tokentap_simulator foo`, wantErr: "wrong argument count"},
		{name: "unknown subdirective", input: "tokentap_simulator {\nspeed 3\n}", wantErr: "unrecognized tokentap_simulator subdirective 'speed'"},
		{name: "duplicate subdirective", input: "tokentap_simulator {\njitter 0.1\njitter 0.2\n}", wantErr: "duplicate tokentap_simulator subdirective 'jitter'"},
		{name: "duplicate fault", input: "tokentap_simulator {\nerror_after 1\nerror_after 2\n}", wantErr: "duplicate"},
		{name: "duplicate model", input: "tokentap_simulator {\nmodel a {\njitter 0.1\n}\nmodel a\n}", wantErr: "duplicate model 'a'"},
		{name: "duplicate in model", input: "tokentap_simulator {\nmodel a {\noutput_tokens 3\noutput_tokens 4\n}\n}", wantErr: "duplicate subdirective 'output_tokens' in model 'a'"},
		{name: "unknown in model", input: "tokentap_simulator {\nmodel a {\nusage always\n}\n}", wantErr: "unrecognized subdirective 'usage' in model 'a'"},
		{name: "model without name", input: "tokentap_simulator {\nmodel\n}", wantErr: "wrong argument count"},
		{name: "model with two names", input: "tokentap_simulator {\nmodel a b\n}", wantErr: "wrong argument count"},
		{name: "missing argument", input: "tokentap_simulator {\ntokens_per_second\n}", wantErr: "wrong argument count"},
		{name: "negative batch slowdown", input: "tokentap_simulator {\nbatch_slowdown -0.1\n}", wantErr: "batch_slowdown must be a positive finite number"},
		{name: "bad prefill rate", input: "tokentap_simulator {\nprefill_tokens_per_second fast\n}", wantErr: "parsing prefill_tokens_per_second"},
		{name: "extra argument", input: "tokentap_simulator {\noutput_tokens 1 2\n}", wantErr: "wrong argument count"},
		{name: "bad duration", input: "tokentap_simulator {\ntime_to_first_token soon\n}", wantErr: "parsing time_to_first_token"},
		{name: "negative duration", input: "tokentap_simulator {\ntime_to_first_token -1s\n}", wantErr: "must not be negative"},
		{name: "bad rate", input: "tokentap_simulator {\ntokens_per_second fast\n}", wantErr: "parsing tokens_per_second"},
		{name: "zero rate", input: "tokentap_simulator {\ntokens_per_second 0\n}", wantErr: "tokens_per_second must be a positive"},
		{name: "jitter of one", input: "tokentap_simulator {\njitter 1\n}", wantErr: "jitter must be in [0, 1)"},
		{name: "zero output tokens", input: "tokentap_simulator {\noutput_tokens 0\n}", wantErr: "output_tokens must be from 1"},
		{name: "bad usage", input: "tokentap_simulator {\nusage sometimes\n}", wantErr: "usage must be auto, always or never"},
		{name: "bad seed", input: "tokentap_simulator {\nseed x\n}", wantErr: "parsing seed"},
		{name: "status out of range", input: "tokentap_simulator {\nfail_status 200\n}", wantErr: "fail_status must be from 400 to 599"},
		{name: "bad status body", input: "tokentap_simulator {\nfail_status_body html\n}", wantErr: "fail_status_body must be json or none"},
		{name: "negative fault", input: "tokentap_simulator {\nabort_after -1\n}", wantErr: "abort_after must be a non-negative integer"},
		{name: "bad model field", input: "tokentap_simulator {\nmodel a {\njitter 2\n}\n}", wantErr: "jitter must be in [0, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Handler
			err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("parsed config does not validate: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       Handler
		wantErr string
	}{
		{name: "zero value", h: Handler{}},
		{name: "full", h: Handler{Profile: Profile{TokensPerSecond: 10, Jitter: 0.5}, Usage: UsageNever, FailStatus: 429, ErrorAfter: intp(0)}},
		{name: "negative ttft", h: Handler{Profile: Profile{TimeToFirstToken: -1}}, wantErr: "time_to_first_token"},
		{name: "negative rate", h: Handler{Profile: Profile{TokensPerSecond: -1}}, wantErr: "tokens_per_second"},
		{name: "jitter too big", h: Handler{Profile: Profile{Jitter: 1}}, wantErr: "jitter"},
		{name: "too many tokens", h: Handler{Profile: Profile{OutputTokens: MaxOutputTokens + 1}}, wantErr: "output_tokens"},
		{name: "bad model profile", h: Handler{Models: map[string]Profile{"m": {Jitter: -0.1}}}, wantErr: `model "m": jitter`},
		{name: "empty model name", h: Handler{Models: map[string]Profile{"": {}}}, wantErr: "empty model name"},
		{name: "bad usage", h: Handler{Usage: "maybe"}, wantErr: "usage"},
		{name: "bad status", h: Handler{FailStatus: 302}, wantErr: "fail_status"},
		{name: "bad status body", h: Handler{FailStatusBody: "xml"}, wantErr: "fail_status_body"},
		{name: "negative fault", h: Handler{TruncateAfter: intp(-2)}, wantErr: "truncate_after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
