package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch/pb/sketchpb"
	"google.golang.org/protobuf/proto"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// historyCaddyfile is one instance with the history in Caddy's storage
// (a directory of the test's, so that the restarted process finds it):
// admin, storage root, history name, proxy port, simulator address and
// port.
const historyCaddyfile = `{
	admin %s
	default_bind 127.0.0.1
	skip_install_trust
	storage file_system {
		root %s
	}
	tokentap_history {
		name %s
		interval 1h
	}
}

http://:%s {
	handle_path /sim/* {
		tokentap
		reverse_proxy %s
	}
}

http://:%s {
	tokentap_simulator {
		output_tokens 12
	}
}
`

// TestHistoryRestart runs two instances, a and b, sends both traffic,
// then reloads a (which must not restore again) and stops and starts it
// on the same storage: its sketches, series and health, and the fleet
// view `tokentap stats --from a,b`, are exactly what they were; then a
// takes more traffic, and its sketches are the earlier ones plus the new
// requests, bin by bin. The history is saved by the stop, not the
// interval (1h).
func TestHistoryRestart(t *testing.T) {
	bin := testbin.Binary(t)
	env := append(testbin.Environ("OTEL_"), "OTEL_METRICS_EXPORTER=none", "OTEL_TRACES_EXPORTER=none")
	storage := t.TempDir()
	type instance struct {
		name, admin, proxy, sim, caddyfile string
		p                                  *testbin.Process
	}
	start := func(in *instance) {
		in.p = testbin.Start(t, testbin.Config{
			Name: in.name, Bin: bin, Caddyfile: in.caddyfile, Env: env,
			AfterStop: func(out string) {
				if t.Failed() {
					t.Logf("%s output:\n%s", in.name, testbin.LastLines(out, 40))
				}
			},
		})
		in.p.WaitReady(t, 30*time.Second, "http://"+in.admin+"/config/")
		in.p.WaitListening(t, 30*time.Second, in.proxy, in.sim)
	}
	var instances []*instance
	for _, name := range []string{"a", "b"} {
		in := &instance{name: name, admin: testbin.FreeAddr(t), proxy: testbin.FreeAddr(t), sim: testbin.FreeAddr(t)}
		in.caddyfile = fmt.Sprintf(historyCaddyfile, in.admin, filepath.Join(storage, name), name, port(in.proxy), in.sim, port(in.sim))
		start(in)
		instances = append(instances, in)
	}
	a, b := instances[0], instances[1]
	send := func(in *instance, tr fleetTraffic, from, n int) {
		for i := from; i < from+n; i++ {
			if err := fleetRequest(in.proxy, tr, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	fast := fleetTraffic{"hist-fast", 150, 250, 0.01, 0.03}
	slow := fleetTraffic{"hist-slow", 40, 70, 0.02, 0.05}
	send(a, fast, 0, 30)
	send(a, slow, 0, 20)
	send(b, fast, 100, 25)

	// The views compared: a's sketches (every bin) with series and
	// health, for windows that hold all of the test's traffic however
	// the slices fall, and the fleet's merged report.
	windows := []string{"5m", "1h", "24h"}
	sketches := func(in *instance, w string) string {
		return stripGenerated(t, adminGet(t, in.admin, "/tokentap/stats/sketches?series=true&window="+w))
	}
	fleet := func(w string) string {
		out, err := exec.Command(bin, "stats", "--from", a.admin, "--from", b.admin, "--window", w, "--json").Output()
		if err != nil {
			t.Fatalf("tokentap stats --from a,b: %v", err)
		}
		return stripGenerated(t, string(out))
	}
	before := map[string]string{}
	for _, w := range windows {
		before["a "+w] = sketches(a, w)
		before["fleet "+w] = fleet(w)
	}
	check := func(when string) {
		t.Helper()
		for _, w := range windows {
			if got := sketches(a, w); got != before["a "+w] {
				t.Errorf("%s: a's %s sketches differ:\n got %.400s\nwant %.400s", when, w, got, before["a "+w])
			}
			if got := fleet(w); got != before["fleet "+w] {
				t.Errorf("%s: the fleet's %s view differs:\n got %.400s\nwant %.400s", when, w, got, before["fleet "+w])
			}
		}
	}

	// A reload stops the config (which saves) and provisions the next,
	// which must not restore into the live stats again.
	cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(a.caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "reload", "--config", cfgPath, "--adapter", "caddyfile", "--address", a.admin, "--force").CombinedOutput(); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	check("after a reload")

	if err := a.p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(storage, "a", "tokentap", "stats", "a.snapshot")); err != nil {
		t.Fatalf("no history in a's storage after its stop: %v", err)
	}
	start(a)
	if out := a.p.Output(); !strings.Contains(out, "live stats history restored") {
		t.Errorf("the restarted instance did not log its restore:\n%s", testbin.LastLines(out, 20))
	}
	check("after a restart")

	// New traffic after the restart adds to the restored sketches.
	send(a, fast, 500, 10)
	for _, w := range windows {
		grown := sketchBins(t, sketches(a, w))
		for id, old := range sketchBins(t, before["a "+w]) {
			added := 0.0
			for bin, n := range grown[id] {
				if n < old[bin] {
					t.Errorf("%s %s bin %d: %v after, %v before", w, id, bin, n, old[bin])
				}
				added += n - old[bin]
			}
			want := 0.0
			if strings.HasPrefix(id, "hist-fast/") && strings.HasSuffix(id, "/duration") {
				want = 10
			}
			if strings.HasSuffix(id, "/duration") && added != want {
				t.Errorf("%s %s: %v points added, want %v", w, id, added, want)
			}
		}
	}
}

// adminGet returns the body of an admin API GET.
func adminGet(t *testing.T, admin, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %.300s", path, resp.StatusCode, err, b)
	}
	return string(b)
}

// stripGenerated removes what differs between two reads of the same
// state: the document's generated_at, and the empty slices of each row's
// series, which move with the clock.
func stripGenerated(t *testing.T, doc string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%v: %.300s", err, doc)
	}
	delete(m, "generated_at")
	rows, _ := m["rows"].([]any)
	for _, r := range rows {
		row, _ := r.(map[string]any)
		series, _ := row["series"].([]any)
		var kept []any
		for _, sl := range series {
			if n, _ := sl.(map[string]any)["requests"].(float64); n > 0 {
				kept = append(kept, sl)
			}
		}
		if series != nil {
			row["series"] = kept
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sketchBins reads a sketches document's row sketches into bin counts by
// "model/labels/metric".
func sketchBins(t *testing.T, doc string) map[string]map[int32]float64 {
	t.Helper()
	var snap struct {
		Rows []struct {
			Model    string            `json:"model"`
			Sketches map[string]string `json:"sketches"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(doc), &snap); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int32]float64{}
	for _, r := range snap.Rows {
		for metric, enc := range r.Sketches {
			raw, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				t.Fatal(err)
			}
			var pb sketchpb.DDSketch
			if err := proto.Unmarshal(raw, &pb); err != nil {
				t.Fatal(err)
			}
			bins := map[int32]float64{-1 << 31: pb.ZeroCount}
			if s := pb.PositiveValues; s != nil {
				for i, c := range s.ContiguousBinCounts {
					bins[s.ContiguousBinIndexOffset+int32(i)] += c
				}
				for i, c := range s.BinCounts {
					bins[i] += c
				}
			}
			out[r.Model+"/"+metric] = bins
		}
	}
	return out
}
