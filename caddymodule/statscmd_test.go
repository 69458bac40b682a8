package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokentap/tokentap/internal/stats"
)

// Admin addresses of the fake instances in these tests (this file's share
// of the stats tests' port range), and one where nothing listens.
const (
	fakeAdminA    = "127.0.0.1:2313"
	fakeAdminB    = "127.0.0.1:2314"
	fakeAdminAll  = "127.0.0.1:2315"
	fakeAdminDown = "127.0.0.1:2316"
)

// runStatsCommand runs `tokentap stats args...` in-process, through the
// registered command's flags and body, and returns what it printed.
func runStatsCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "stats", SilenceUsage: true, SilenceErrors: true}
	caddycmd.Commands()["stats"].CobraFunc(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// serveFakeAdmin serves the admin API of store s on addr (port 0: one the
// system picks), with Caddy's answer to an APIError, as a stand-in for
// another tokentap instance; it returns the address it listens on.
func serveFakeAdmin(t *testing.T, addr string, s *stats.Store) string {
	t.Helper()
	a := newTestAdminAPI(s, time.Now())
	a.now = time.Now
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		h := r.Handler
		mux.HandleFunc(r.Pattern, func(w http.ResponseWriter, req *http.Request) {
			if err := h.ServeHTTP(w, req); err != nil {
				var apiErr caddy.APIError
				errors.As(err, &apiErr)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(apiErr.HTTPStatus)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": apiErr.Err.Error()})
			}
		})
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s (the stats tests' port range): %v", addr, err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// splitTraffic records the same requests into a (even ones), b (odd ones)
// and all (every one): three models, a label, some failures, some
// estimates, values spread over a decade.
func splitTraffic(a, b, all *stats.Store) {
	now := time.Now()
	for i := 0; i < 300; i++ {
		k := stats.Key{Provider: "openai", Model: []string{"fast", "medium", "slow"}[i%3], Labels: []stats.Label{{Name: "team", Value: []string{"ads", "search"}[i%5%2]}}}
		base := float64(1 + i%3)
		var smp stats.Sample
		smp.Set(stats.TimeToFirstToken, 0.1*base*(1+float64(i%17)/4))
		smp.Set(stats.OutputTokensPerSecond, 120/base*(1+float64(i%13)/6))
		smp.Set(stats.Duration, 2*base+float64(i%7)/3)
		smp.Set(stats.OutputTokens, float64(100+i%50))
		smp.Error, smp.Estimated = i%23 == 0, i%11 == 0
		smp.Inflight = int64(1 + i%9)
		for _, s := range []*stats.Store{[]*stats.Store{a, b}[i%2], all} {
			k := k
			s.Record(&k, &smp, now)
		}
	}
}

// TestStatsMergesInstances: `tokentap stats --from A --from B` prints
// exactly what `tokentap stats` prints for one instance that saw the
// traffic of both, as JSON and as a table: the sketches merge bin by bin.
func TestStatsMergesInstances(t *testing.T) {
	a, b, all := stats.NewStore(stats.Options{}), stats.NewStore(stats.Options{}), stats.NewStore(stats.Options{})
	splitTraffic(a, b, all)
	serveFakeAdmin(t, fakeAdminA, a)
	serveFakeAdmin(t, fakeAdminB, b)
	serveFakeAdmin(t, fakeAdminAll, all)

	tests := []struct {
		name string
		args []string
	}{
		{"json, 5m", []string{"--json"}},
		{"json, 1m", []string{"--json", "--window", "1m"}},
		{"table", []string{"--sort", "-tps_p50"}},
		{"table, 1h, by ttft p95", []string{"--window", "1h", "--sort", "ttft_p95"}},
		{"json with series, 1m", []string{"--json", "--series", "--window", "1m"}},
		{"table with series, 24h", []string{"--series", "--window", "24h"}},
		{"table by in-flight level", []string{"--by-inflight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged, err := runStatsCommand(t, append(tt.args, "--from", fakeAdminA, "--from", fakeAdminB)...)
			if err != nil {
				t.Fatal(err)
			}
			single, err := runStatsCommand(t, append(tt.args, "--address", fakeAdminAll)...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(merged, `"version"`) {
				var m, s stats.Report
				if err := json.Unmarshal([]byte(merged), &m); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(single), &s); err != nil {
					t.Fatal(err)
				}
				m.GeneratedAt, s.GeneratedAt = time.Time{}, time.Time{}
				// Health is each instance's detector's (merged by the worse
				// state, stats.TestMergeHealth), not the union's.
				for _, rep := range []*stats.Report{&m, &s} {
					for i := range rep.Rows {
						rep.Rows[i].Health = nil
					}
				}
				if len(s.Rows) != 6 {
					t.Fatalf("%d rows, want 6", len(s.Rows))
				}
				if series := slices.Contains(tt.args, "--series"); series != (len(s.Rows[0].Series) == 6) {
					t.Fatalf("--series %v, but the first row has %d slices", series, len(s.Rows[0].Series))
				}
				if !reflect.DeepEqual(m, s) {
					t.Errorf("merged view differs from the single instance's:\n%s\n%s", merged, single)
				}
				return
			}
			if merged != single {
				t.Errorf("merged table differs from the single instance's:\n%s\n%s", merged, single)
			}
			if slices.Contains(tt.args, "--by-inflight") && (!strings.Contains(single, "By requests in flight, over the last half to whole 5m:") || !strings.Contains(single, " 2-3 ")) {
				t.Errorf("--by-inflight: want the in-flight table:\n%s", single)
			}
			if slices.Contains(tt.args, "--series") && (!strings.Contains(single, "Over the last 24h, by slice of 1h:") || strings.Count(single, "\nopenai") != 6+6*24) {
				t.Errorf("--series: want the table's 6 rows and 24 slices of each:\n%s", single)
			}
		})
	}
}

// TestStatsTable: one row per provider, model and labels, aligned columns,
// sorted by the chosen column, "-" where a row has no value.
func TestStatsTable(t *testing.T) {
	s := stats.NewStore(stats.Options{})
	now := time.Now()
	add := func(model string, ttft, tps float64, n int) {
		for i := 0; i < n; i++ {
			k := stats.Key{Provider: "openai", Model: model}
			var smp stats.Sample
			if ttft > 0 {
				smp.Set(stats.TimeToFirstToken, ttft)
			}
			smp.Set(stats.OutputTokensPerSecond, tps)
			s.Record(&k, &smp, now)
		}
	}
	add("model-slow-start", 1.5, 90, 3)
	add("m-fast", 0.12, 150, 1)
	add("model-no-ttft", 0, 40, 2)
	serveFakeAdmin(t, fakeAdminA, s)

	tests := []struct {
		sort string
		want []string // models, top to bottom
	}{
		{"ttft_p50", []string{"m-fast", "model-slow-start", "model-no-ttft"}},
		{"-ttft_p50", []string{"model-slow-start", "m-fast", "model-no-ttft"}},
		{"-tps_p50", []string{"m-fast", "model-slow-start", "model-no-ttft"}},
		{"TPS_P5", []string{"model-no-ttft", "model-slow-start", "m-fast"}},
		{"requests", []string{"m-fast", "model-no-ttft", "model-slow-start"}},
		{"model", []string{"m-fast", "model-no-ttft", "model-slow-start"}},
		{"-model", []string{"model-slow-start", "model-no-ttft", "m-fast"}},
		{"tps_p99", []string{"model-no-ttft", "model-slow-start", "m-fast"}},
	}
	for _, tt := range tests {
		t.Run(tt.sort, func(t *testing.T) {
			out, err := runStatsCommand(t, "--address", fakeAdminA, "--sort", tt.sort)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if len(lines) != 4 {
				t.Fatalf("%d lines, want a header and 3 rows:\n%s", len(lines), out)
			}
			header := strings.Fields(lines[0])
			col := func(name string) int {
				for i, h := range header {
					if h == name {
						return i
					}
				}
				t.Fatalf("no column %s in %q", name, lines[0])
				return -1
			}
			var models []string
			for _, l := range lines[1:] {
				models = append(models, strings.Fields(l)[col("MODEL")])
				if len(l) != len(lines[0]) {
					t.Errorf("line of %d characters, header %d: not aligned\n%s", len(l), len(lines[0]), out)
				}
			}
			if !reflect.DeepEqual(models, tt.want) {
				t.Errorf("order %v, want %v\n%s", models, tt.want, out)
			}
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				if f[col("MODEL")] == "model-no-ttft" && f[col("TTFT_P50")] != "-" {
					t.Errorf("a model without ttft shows %q", f[col("TTFT_P50")])
				}
				if f[col("MODEL")] == "m-fast" {
					// The cells are rounded to 1 ms and 0.1 token/s.
					ttft := strings.TrimSuffix(f[col("TTFT_P50")], "ms")
					if !within(t, ttft, 120, stats.RelativeAccuracy+0.005) || !within(t, f[col("TPS_P50")], 150, stats.RelativeAccuracy+0.001) {
						t.Errorf("m-fast: ttft %s, tps %s", f[col("TTFT_P50")], f[col("TPS_P50")])
					}
				}
			}
			if strings.Contains(lines[0], "LABELS") {
				t.Error("a LABELS column without labels")
			}
		})
	}
}

func within(t *testing.T, cell string, want, rel float64) bool {
	t.Helper()
	v, err := strconv.ParseFloat(cell, 64)
	return err == nil && v >= want*(1-rel) && v <= want*(1+rel)
}

// TestStatsErrors: bad flags and unreachable or foreign instances fail with
// a message that names the problem and the instance.
func TestStatsErrors(t *testing.T) {
	serveFakeAdmin(t, fakeAdminA, stats.NewStore(stats.Options{}))
	// An HTTP server that is not tokentap's admin API.
	l, err := net.Listen("tcp", fakeAdminB)
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>hello</html>") })}
	go func() { _ = other.Serve(l) }()
	t.Cleanup(func() { _ = other.Close() })

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad window", []string{"--address", fakeAdminA, "--window", "2m"}, `window "2m": use 1m, 5m, 1h or 24h`},
		{"bad sort", []string{"--address", fakeAdminA, "--sort", "speed"}, `--sort "speed"`},
		{"quantile a metric does not report", []string{"--address", fakeAdminA, "--sort", "ttft_p5"}, `--sort "ttft_p5"`},
		{"instance down", []string{"--from", fakeAdminA, "--from", fakeAdminDown}, "instance " + fakeAdminDown},
		{"not tokentap", []string{"--address", fakeAdminB}, "instance " + fakeAdminB + ": not a tokentap sketches document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runStatsCommand(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("no traffic", func(t *testing.T) {
		out, err := runStatsCommand(t, "--address", fakeAdminA, "--window", "1m")
		if err != nil || out != "no requests in the last 1m\n" {
			t.Errorf("%q, %v", out, err)
		}
	})
}

// TestStatsCommandRegistered: `tokentap stats` is a registered Caddy
// command, so any Caddy built with this module has it.
func TestStatsCommandRegistered(t *testing.T) {
	c, ok := caddycmd.Commands()["stats"]
	if !ok {
		t.Fatal("no stats command")
	}
	cmd := &cobra.Command{Use: "stats"}
	c.CobraFunc(cmd)
	for flag, def := range map[string]string{"address": "localhost:2019", "window": "5m", "sort": "ttft_p50", "json": "false", "from": "[]", "series": "false", "by-inflight": "false"} {
		f := cmd.Flags().Lookup(flag)
		if f == nil || f.DefValue != def {
			t.Errorf("flag --%s: %+v, want default %q", flag, f, def)
		}
	}
}
