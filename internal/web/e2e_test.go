package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokentap/tokentap/caddymodule"
	"github.com/tokentap/tokentap/internal/simulator"
)

// The end-to-end test runs a real Caddy in this test binary: tokentap in
// front of the simulator, the admin API serving the stats and the page. Its
// ports are this package's own (admin 2320, HTTP 9320-9322), so it can run
// at the same time as the other packages' Caddy tests.
const (
	e2eAdmin = 2320
	e2eProxy = 9320
	e2eSim   = 9321
	e2eHTTPS = 9322 // never listened on (every site is http://), but Caddy needs one

	e2eStreams = 20 // per model
	e2eTokens  = 60 // per stream: long enough that one late event moves the rate little
)

// The two models, as the simulator is told to serve them.
var e2eModels = []struct {
	name string
	ttft time.Duration
	tps  float64
}{
	{"sim-slow", 300 * time.Millisecond, 40},
	{"sim-fast", 100 * time.Millisecond, 120},
}

var e2eConfig = fmt.Sprintf(`{
	skip_install_trust
	admin localhost:%d
	http_port %d
	https_port %d
	grace_period 1s
}

http://127.0.0.1:%[2]d {
	bind 127.0.0.1
	handle_path /sim/* {
		tokentap
		reverse_proxy 127.0.0.1:%[4]d
	}
}

http://127.0.0.1:%[4]d {
	bind 127.0.0.1
	tokentap_simulator {
		output_tokens %[5]d
		jitter 0.1
		model %[6]s {
			time_to_first_token %[7]s
			tokens_per_second %[8]g
		}
		model %[9]s {
			time_to_first_token %[10]s
			tokens_per_second %[11]g
		}
	}
}
`, e2eAdmin, e2eProxy, e2eHTTPS, e2eSim, e2eTokens,
	e2eModels[0].name, e2eModels[0].ttft, e2eModels[0].tps,
	e2eModels[1].name, e2eModels[1].ttft, e2eModels[1].tps)

// served is what the simulator says it did for one stream (its trailers):
// the ground truth the page's numbers are checked against.
type served struct {
	ttft, tps float64
}

// TestPageEndToEnd is the page's acceptance test: traffic
// from the simulator with two models of known speeds goes through tokentap
// in a real Caddy; the page, loaded from the admin API in headless
// Chromium, must show both models, the faster one first, with the time to
// first token no earlier than the simulator served it, and the same
// numbers as the stats API. The screenshot is kept as an artefact.
func TestPageEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs Caddy, the simulator and Chromium")
	}
	b := newBrowser(t) // skips before Caddy starts when there is no browser
	// No exporter: this test reads the live stats, not OTLP.
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")

	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{
		AdminPort:          e2eAdmin,
		LoadRequestTimeout: 10 * time.Second,
		TestRequestTimeout: 30 * time.Second,
	})
	tester.InitServer(e2eConfig, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	admin := fmt.Sprintf("http://localhost:%d", e2eAdmin)
	waitAnswer(t, fmt.Sprintf("http://127.0.0.1:%d/", e2eProxy))

	// The stats API must be there before traffic is worth sending.
	if _, status, err := fetchStats(admin); err != nil || status != http.StatusOK {
		t.Fatalf("GET %s/tokentap/stats?window=5m: status %d, %v; the admin API's tokentap routes (caddymodule/adminapi.go, admin.api.tokentap) are missing or broken", admin, status, err)
	}

	truth := driveStreams(t)

	// Each exchange is recorded as it ends, just after its last byte;
	// wait until the API has them all.
	var doc statsDoc
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		doc, _, err = fetchStats(admin)
		if err == nil && rowsComplete(doc) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stats never counted %d requests per model: %+v (%v)", e2eStreams, doc.Rows, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Loaded as a user who followed a link on the admin origin: see
	// browser.navigate for why a typed address is refused by Caddy.
	page := admin + "/tokentap/"
	b.navigate(t, page+"?refresh=1", page)
	b.waitFor(t, "both models on the page", `document.body.dataset.state === 'ok' && document.querySelectorAll('#comparison tbody tr').length >= 2`, 15*time.Second)
	got := rows(t, b)

	t.Run("a row per model, the faster first", func(t *testing.T) {
		want := []string{"sim-fast", "sim-slow"} // by tokens/s p50, the page's default
		if m := models(got); !slices.Equal(m, want) {
			t.Fatalf("rows %v, want %v", m, want)
		}
		for _, r := range got {
			if r.Cells["requests"].Value != strconv.Itoa(e2eStreams) {
				t.Errorf("%s: %s requests, want %d", r.Model, r.Cells["requests"].Value, e2eStreams)
			}
		}
	})

	t.Run("time to first token between the simulator's and the end", func(t *testing.T) {
		for _, m := range e2eModels {
			i := slices.IndexFunc(got, func(r renderedRow) bool { return r.Model == m.name })
			if i < 0 {
				t.Fatalf("no row for %s", m.name)
			}
			tps := median(truth[m.name], func(s served) float64 { return s.tps })
			ttft := median(truth[m.name], func(s served) float64 { return s.ttft })
			pageTPS := cellValue(t, got[i], "tps_p50")
			pageTTFT := cellValue(t, got[i], "ttft_p50")
			t.Logf("%s: tokens/s p50 %.2f on the page, %.2f served (configured %g); TTFT p50 %.1f ms on the page, %.1f ms served; shown as %q and %q",
				m.name, pageTPS, tps, m.tps, pageTTFT*1e3, ttft*1e3, plain(got[i].Cells["tps_p50"].Text), plain(got[i].Cells["ttft_p50"].Text))
			// Order only, which holds however loaded the machine (this
			// runs under -race, beside other packages' tests): the proxy
			// sees each stream's first token after the simulator sent
			// it, never before, and before the stream ends; the sketch
			// may round either way by its 1 %. How close the figures
			// come to the simulator's is checked in the quiet timing
			// step (caddymodule.TestTimingAccuracy and
			// TestStatsTimingAccuracy); that the page shows the stats'
			// numbers, exactly, below.
			j := slices.IndexFunc(doc.Rows, func(a statsRow) bool { return a.Model == m.name })
			if j < 0 {
				t.Fatalf("the stats API has no row for %s", m.name)
			}
			dur, ok := doc.Rows[j].quantile("duration", "p50")
			if !ok || pageTTFT < ttft*0.98 || pageTTFT > dur*1.03 {
				t.Errorf("%s: TTFT p50 %.1f ms, want at least the %.1f ms served and at most the duration p50 %.1f ms",
					m.name, pageTTFT*1e3, ttft*1e3, dur*1e3)
			}
			if pageTPS <= 0 {
				t.Errorf("%s: tokens/s p50 %.2f", m.name, pageTPS)
			}
		}
	})

	t.Run("the page shows what the stats API says", func(t *testing.T) {
		for _, r := range got {
			i := slices.IndexFunc(doc.Rows, func(a statsRow) bool { return a.Model == r.Model })
			if i < 0 {
				t.Fatalf("the page shows %s, which the API does not have", r.Model)
			}
			for col, q := range map[string][2]string{
				"ttft_p50":     {"time_to_first_token", "p50"},
				"tps_p50":      {"output_tokens_per_second", "p50"},
				"tps_p5":       {"output_tokens_per_second", "p5"},
				"duration_p95": {"duration", "p95"},
			} {
				want, ok := doc.Rows[i].quantile(q[0], q[1])
				if !ok {
					t.Errorf("%s: the API has no %s %s", r.Model, q[0], q[1])
					continue
				}
				if g := cellValue(t, r, col); g != want {
					t.Errorf("%s %s: page %v, API %v", r.Model, col, g, want)
				}
			}
		}
	})

	t.Run("both charts draw both models", func(t *testing.T) {
		for _, id := range []string{"chart-ttft", "chart-tps"} {
			drawn := eval[[]string](t, b, `[...document.querySelectorAll('#`+id+` g[data-model]')].filter(g => g.querySelector('rect.box')).map(g => g.dataset.model)`)
			if !slices.Equal(drawn, []string{"sim-fast", "sim-slow"}) {
				t.Errorf("%s draws %v", id, drawn)
			}
		}
	})

	t.Run("the comparison of the two models shows what the API answers", func(t *testing.T) {
		// The page's own options, so that its selectors are the ones tested.
		pick := func(side, model string) string {
			v := eval[string](t, b, `(s => { const o = [...s.options].find(o => o.textContent.startsWith(`+jsString(model+" ")+`)); if (!o) return ''; s.value = o.value; s.dispatchEvent(new Event('change')); return o.value; })(document.getElementById('compare-`+side+`'))`)
			if v == "" {
				t.Fatalf("the %s select offers no %s", side, model)
			}
			return v
		}
		a, bsel := pick("a", "sim-slow"), pick("b", "sim-fast")
		b.waitFor(t, "the comparison", `document.getElementById('compare').dataset.state === 'ok'`, 15*time.Second)
		resp, err := http.Get(admin + "/tokentap/stats/compare?window=5m&a=" + url.QueryEscape(a) + "&b=" + url.QueryEscape(bsel))
		if err != nil {
			t.Fatal(err)
		}
		var cmp compareDoc
		err = json.NewDecoder(resp.Body).Decode(&cmp)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stats/compare: status %d, %v", resp.StatusCode, err)
		}
		for _, id := range []struct{ id, metric string }{{"compare-ttft", "time_to_first_token"}, {"compare-tps", "output_tokens_per_second"}} {
			got := eval[[]renderedRatio](t, b, `(`+readRatios+`)(`+jsString(id.id)+`)`)
			if len(got) != 2 {
				t.Fatalf("%s: %d quantiles drawn", id.id, len(got))
			}
			for _, r := range got {
				want := mustMetric(t, cmp, id.metric, r.Quantile)
				t.Logf("%s %s: page fair %q %q; API fair %+v %q", id.id, r.Quantile, r.Fair, r.NotComparable, want.Fair, want.NotComparable)
				switch {
				case want.Fair != nil && r.Fair != fmt.Sprint(want.Fair.Ratio):
					t.Errorf("%s %s: fair %q on the page, %v from the API", id.id, r.Quantile, r.Fair, want.Fair.Ratio)
				case want.Fair == nil && r.NotComparable != "not comparable: "+want.NotComparable:
					t.Errorf("%s %s: %q on the page, the API says not comparable: %s", id.id, r.Quantile, r.NotComparable, want.NotComparable)
				}
			}
		}
		if n := eval[int](t, b, `document.querySelectorAll('#compare-tps-cells g.cell').length`); n == 0 {
			t.Error("no cell drawn")
		}
	})

	b.Screenshot(t, "tokentap-page.png")
	b.CheckClean(t)
}

// driveStreams sends e2eStreams streams per model through the proxy, a few
// at a time, and returns what the simulator served, per model.
func driveStreams(t *testing.T) map[string][]served {
	t.Helper()
	var (
		mu    sync.Mutex
		truth = map[string][]served{}
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range e2eStreams {
		for _, m := range e2eModels {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s, err := stream(client, m.name, i)
				if err != nil {
					t.Errorf("%s stream %d: %v", m.name, i, err)
					return
				}
				mu.Lock()
				truth[m.name] = append(truth[m.name], s)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return truth
}

// stream sends one streamed chat completion through tokentap and reads the
// simulator's schedule from its trailers.
func stream(client *http.Client, model string, i int) (served, error) {
	// A different prompt per request: the simulator draws its jitter from
	// the request body.
	body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"request %d"}]}`, model, i)
	resp, err := client.Post(fmt.Sprintf("http://127.0.0.1:%d/sim/v1/chat/completions", e2eProxy), "application/json", strings.NewReader(body))
	if err != nil {
		return served{}, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return served{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return served{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	trailer := func(name string) (float64, error) {
		v, err := strconv.ParseFloat(resp.Trailer.Get(name), 64)
		if err != nil {
			return 0, fmt.Errorf("trailer %s: %w (trailers %v)", name, err, resp.Trailer)
		}
		return v, nil
	}
	first, err := trailer(simulator.HeaderTimeToFirstToken)
	if err != nil {
		return served{}, err
	}
	last, err := trailer(simulator.HeaderLastToken)
	if err != nil {
		return served{}, err
	}
	n, err := trailer(simulator.HeaderOutputTokens)
	if err != nil {
		return served{}, err
	}
	if n != e2eTokens || last <= first {
		return served{}, fmt.Errorf("served %v tokens from %vs to %vs, want %d", n, first, last, e2eTokens)
	}
	// The decode rate, defined as tokentap defines it.
	return served{ttft: first, tps: (n - 1) / (last - first)}, nil
}

func fetchStats(admin string) (statsDoc, int, error) {
	var d statsDoc
	resp, err := http.Get(admin + "/tokentap/stats?window=5m")
	if err != nil {
		return d, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, resp.StatusCode, nil
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	return d, resp.StatusCode, err
}

// rowsComplete says whether every model's row has all its streams, each
// with a measured rate.
func rowsComplete(d statsDoc) bool {
	for _, m := range e2eModels {
		i := slices.IndexFunc(d.Rows, func(r statsRow) bool { return r.Model == m.name })
		if i < 0 || d.Rows[i].Requests < e2eStreams || d.Rows[i].Metrics["output_tokens_per_second"].Count < e2eStreams {
			return false
		}
	}
	return true
}

func waitAnswer(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", url, err)
		}
	}
}

// median is the lower median, the value at rank ceil(n/2) as quantile
// sketches rank.
func median(ss []served, f func(served) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func cellValue(t *testing.T, r renderedRow, col string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r.Cells[col].Value, 64)
	if err != nil {
		t.Fatalf("%s %s: data-value %q: %v", r.Model, col, r.Cells[col].Value, err)
	}
	return v
}
