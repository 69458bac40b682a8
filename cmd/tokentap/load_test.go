package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/simulator"
)

// loadSimAddr is where the load command's tests serve the simulator: in the
// port range reserved for the load tests, apart from loadgen's own.
const loadSimAddr = "127.0.0.1:9365"

// seen records what the simulator was sent.
type seen struct {
	mu      sync.Mutex
	prompts []string
	auth    []string
}

func startLoadSimulator(t *testing.T) (string, *seen) {
	t.Helper()
	h := simulator.Handler{
		Profile: simulator.Profile{TimeToFirstToken: caddy.Duration(time.Millisecond), TokensPerSecond: 1000, OutputTokens: 5},
	}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", loadSimAddr)
	if err != nil {
		t.Fatalf("the load command's tests serve the simulator on %s: %v", loadSimAddr, err)
	}
	s := &seen{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.prompts = append(s.prompts, gjson.GetBytes(body, "messages.0.content").String())
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		_ = h.ServeHTTP(w, r, nil) // the simulator answers its errors itself
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, s
}

// loadFlags parses args as the load command would.
func loadFlags(t *testing.T, args ...string) caddycmd.Flags {
	t.Helper()
	cmd := &cobra.Command{Use: "load"}
	addLoadFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return caddycmd.Flags{FlagSet: cmd.Flags()}
}

func TestLoadCommand(t *testing.T) {
	base, sim := startLoadSimulator(t)
	prompts := filepath.Join(t.TempDir(), "prompts.txt")
	if err := os.WriteFile(prompts, []byte("# two prompts\nfirst prompt\n\"second\\nprompt\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
		check    func(t *testing.T, out string)
	}{
		{
			name: "table, two models",
			args: []string{"--url", base + "/v1", "--model", "a", "--model", "b", "--concurrency", "2", "--requests", "4"},
			check: func(t *testing.T, out string) {
				for _, want := range []string{"openai " + base + "/v1/chat/completions, concurrency 2, 4 requests", "TTFT ms p50"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
				for _, row := range []string{"a", "b", "all"} {
					if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
						f := strings.Fields(l)
						return len(f) > 2 && f[0] == row && f[1] == map[string]string{"a": "2", "b": "2", "all": "4"}[row]
					}) {
						t.Errorf("no row %q with its completed requests:\n%s", row, out)
					}
				}
			},
		},
		{
			name: "json, anthropic, prompts file and a header",
			args: []string{"--url", base, "--api", "anthropic", "--model", "c", "--requests", "4", "--json",
				"--prompts", prompts, "--header", "Authorization: Bearer sk-test", "--max-tokens", "3"},
			check: func(t *testing.T, out string) {
				var rep loadgen.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("not a JSON report: %v\n%s", err, out)
				}
				if rep.API != loadgen.Anthropic || rep.URL != base+"/v1/messages" || len(rep.Models) != 1 ||
					rep.Models[0].Succeeded != 4 || rep.Models[0].OutputTokens != 12 {
					t.Errorf("report %+v", rep)
				}
				sim.mu.Lock()
				defer sim.mu.Unlock()
				got := sim.prompts[len(sim.prompts)-4:]
				slices.Sort(got)
				if want := []string{"first prompt", "first prompt", "second\nprompt", "second\nprompt"}; !slices.Equal(got, want) {
					t.Errorf("prompts sent %q, want %q", got, want)
				}
				for _, a := range sim.auth[len(sim.auth)-4:] {
					if a != "Bearer sk-test" {
						t.Errorf("Authorization %q", a)
					}
				}
			},
		},
		{
			name: "a rate sweep, poisson, with warm-up, as JSON",
			args: []string{"--url", base + "/v1", "--model", "a", "--sweep", "rate=40,80", "--arrival", "poisson", "--burstiness", "0.5", "--seed", "3", "--warmup", "2", "--requests", "4", "--json"},
			check: func(t *testing.T, out string) {
				var rep loadgen.SweepReport
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("%v in %s", err, out)
				}
				if rep.Sweep != "rate" || len(rep.Levels) != 2 || rep.Levels[0].Rate != 40 || rep.Levels[1].Rate != 80 {
					t.Fatalf("sweep %+v", rep)
				}
				for _, l := range rep.Levels {
					if l.Arrival != loadgen.ArrivalPoisson || l.Burstiness != 0.5 || l.Warmup != 2 || l.Total.Requests != 4 {
						t.Errorf("level %+v: want poisson, burstiness 0.5, 2 warm-up and 4 counted requests", l)
					}
				}
			},
		},
		{
			name: "sized prompts, and outputs shorter than asked for",
			args: []string{"--url", base + "/v1", "--model", "a", "--input-tokens", "30", "--max-tokens", "8", "--requests", "3", "--json"},
			check: func(t *testing.T, out string) {
				var rep loadgen.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("%v in %s", err, out)
				}
				// The simulator streams 5 tokens, not the 8 asked for.
				if m := rep.Models[0]; m.OutputLengthMismatch != 3 {
					t.Errorf("output_length_mismatch %d, want 3: %+v", m.OutputLengthMismatch, m)
				}
				c, err := tokencount.New("o200k_base")
				if err != nil {
					t.Fatal(err)
				}
				sim.mu.Lock()
				defer sim.mu.Unlock()
				for _, p := range sim.prompts[len(sim.prompts)-3:] {
					if n := c.Tokens([]byte(p)); n != 30 {
						t.Errorf("prompt %q is %d tokens, want 30", p, n)
					}
				}
			},
		},
		{name: "bad input tokens", args: []string{"--url", base, "--model", "a", "--input-tokens", "many"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "want mean[,stdev]"},
		{name: "a bad sweep", args: []string{"--url", base, "--model", "a", "--sweep", "users=1,2"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "want concurrency=1,2,4,8 or rate"},
		{name: "a bad arrival", args: []string{"--url", base, "--model", "a", "--rate", "2", "--arrival", "wave"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: `arrival must be "constant" or "poisson"`},
		{name: "a bad seed", args: []string{"--url", base, "--model", "a", "--seed", "-1"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "seed"},
		{
			name:     "every request failed",
			args:     []string{"--url", base + "/v1", "--model", "a", "--requests", "2", "--header", simulator.HeaderStatus + ": 503"},
			wantCode: 1, wantErr: "every request failed",
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, "failed: a: 2 http_503") {
					t.Errorf("the report is still printed, with the failures:\n%s", out)
				}
			},
		},
		{name: "no url", args: []string{"--model", "a"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "URL is required"},
		{name: "no model", args: []string{"--url", base}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "at least one model"},
		{name: "bad header", args: []string{"--url", base, "--model", "a", "--header", "no colon"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "Name: value"},
		{name: "missing prompts file", args: []string{"--url", base, "--model", "a", "--prompts", filepath.Join(t.TempDir(), "none")}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "prompts"},
		{name: "unknown api", args: []string{"--url", base, "--model", "a", "--api", "cohere"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "cohere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runLoad(context.Background(), loadFlags(t, tc.args...), &out)
			if code != tc.wantCode || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("exit %d, error %v; want %d and an error containing %q\n%s", code, err, tc.wantCode, tc.wantErr, out.String())
			}
			if tc.check != nil {
				tc.check(t, out.String())
			}
		})
	}
}

func TestLoadBounds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		args         []string
		wantRequests int
		wantDuration time.Duration
	}{
		{name: "neither bound given", args: nil, wantRequests: defaultLoadRequests},
		{name: "duration alone", args: []string{"--duration", "30s"}, wantDuration: 30 * time.Second},
		{name: "requests alone", args: []string{"--requests", "7"}, wantRequests: 7},
		{name: "both", args: []string{"--requests", "7", "--duration", "1m"}, wantRequests: 7, wantDuration: time.Minute},
		// Zero for both is the user's explicit choice, which Run refuses.
		{name: "explicit zero", args: []string{"--requests", "0"}, wantRequests: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadConfig(loadFlags(t, append([]string{"--url", "http://127.0.0.1:9365", "--model", "a"}, tc.args...)...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Requests != tc.wantRequests || cfg.Duration != tc.wantDuration {
				t.Errorf("requests %d, duration %v; want %d, %v", cfg.Requests, cfg.Duration, tc.wantRequests, tc.wantDuration)
			}
		})
	}
}
