package web_test

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pageStep is one step of TestPage.
type pageStep = struct {
	name string
	run  func(t *testing.T)
}

// renderedRatio is one quantile's row of a comparison chart: the numbers
// it carries and where it drew them.
type renderedRatio struct {
	Quantile      string  `json:"q"`
	Fair          string  `json:"fair"`
	Low           string  `json:"low"`
	High          string  `json:"high"`
	Naive         string  `json:"naive"`
	Verdict       string  `json:"verdict"`
	NotComparable string  `json:"notComparable"`
	RectX         float64 `json:"rectX"`
	RectW         float64 `json:"rectW"`
	MidX          float64 `json:"midX"`
	NaiveX        float64 `json:"naiveX"`
	Bars          int     `json:"bars"`
}

const readRatios = `(id => [...document.querySelectorAll('#' + id + ' g[data-quantile]')].map(g => {
	const rect = g.querySelector('rect.fair'), mid = g.querySelector('line.fair-mid'), naive = g.querySelector('path.naive');
	return {q: g.dataset.quantile, fair: g.dataset.fair || '', low: g.dataset.low || '', high: g.dataset.high || '',
		naive: g.dataset.naive || '', verdict: g.dataset.verdict || '', notComparable: g.dataset.notComparable || '',
		rectX: rect ? +rect.getAttribute('x') : 0, rectW: rect ? +rect.getAttribute('width') : 0,
		midX: mid ? +mid.getAttribute('x1') : 0, naiveX: naive ? +naive.getAttribute('d').match(/^M([\d.]+)/)[1] : 0,
		bars: g.querySelectorAll('rect').length};
}))`

// compareTableRow is one quantile's row of a comparison table, by column.
type compareTableRow map[string]renderedCell

const readCompareTable = `(id => Object.fromEntries([...document.querySelectorAll('#' + id + '-table tbody tr')].map(tr =>
	[tr.dataset.quantile, Object.fromEntries([...tr.querySelectorAll('td')].map(td => [td.dataset.col, {text: td.textContent, value: td.dataset.value}]))])))`

// fmtRatio is the page's ratio: three significant digits.
func fmtRatio(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// fmtShare is the page's percentage.
func fmtShare(v float64) string { return fmt.Sprintf("%.1f %%", v*100) }

// chooseCompare picks value in the select of side a or b, as a user does.
func chooseCompare(t *testing.T, b *browser, side, value string) {
	t.Helper()
	if !eval[bool](t, b, `(s => { if (![...s.options].some(o => o.value === `+jsString(value)+`)) return false; s.value = `+jsString(value)+`; s.dispatchEvent(new Event('change')); return true; })(document.getElementById('compare-`+side+`'))`) {
		t.Fatalf("the %s select offers no %q: %v", side, value, eval[[]string](t, b, `[...document.getElementById('compare-`+side+`').options].map(o => o.value)`))
	}
}

// compareSteps are TestPage's steps for "Compare two models", run on the
// stats fixture in the 5m window.
func compareSteps(t *testing.T, b *browser, api *fakeStats) []pageStep {
	fair := readCompareFixture(t, "testdata/compare.json")
	apart := readCompareFixture(t, "testdata/compare-apart.json")
	metrics := []struct {
		id, metric    string
		lowerIsBetter bool
	}{{"compare-ttft", "time_to_first_token", true}, {"compare-tps", "output_tokens_per_second", false}}
	// waitCompare waits until the section has shown a new answer.
	waitCompare := func(t *testing.T, what string) {
		t.Helper()
		n := eval[string](t, b, `document.getElementById('compare').dataset.loads || '0'`)
		b.waitFor(t, what, `document.getElementById('compare').dataset.state === 'ok' && (document.getElementById('compare').dataset.loads || '0') !== `+jsString(n), 10*time.Second)
	}
	return []pageStep{
		{"compare: nothing is asked until A and B are chosen", func(t *testing.T) {
			api.serveCompare(fair)
			b.waitFor(t, "the invitation to choose", `document.getElementById('compare').dataset.state === 'pick'`, 10*time.Second)
			offered := eval[[]string](t, b, `[...document.getElementById('compare-a').options].map(o => o.value).filter(v => v)`)
			want := []string{fair.B.Selector, selector(keyGPT4o), selector(keyGPTMini)} // by provider, model: the overflow row cannot be selected
			if !slices.Equal(offered, want) {
				t.Errorf("A offers %q, want %q", offered, want)
			}
			chooseCompare(t, b, "a", fair.A.Selector)
			b.waitFor(t, "the next refresh", `+document.body.dataset.loads > `+eval[string](t, b, `document.body.dataset.loads`), 10*time.Second)
			if n := len(api.compareQueries()); n != 0 {
				t.Errorf("%d comparisons asked with only A chosen", n)
			}
		}},
		{"compare: choosing B asks for the two rows' comparison in the window", func(t *testing.T) {
			chooseCompare(t, b, "b", fair.B.Selector)
			waitCompare(t, "the comparison")
			qs := api.compareQueries()
			if len(qs) == 0 {
				t.Fatal("no comparison asked")
			}
			q := qs[len(qs)-1]
			for k, want := range map[string]string{"a": fair.A.Selector, "b": fair.B.Selector, "window": "5m", "cells": "true"} {
				if got := q.Get(k); got != want {
					t.Errorf("asked %s=%q, want %q", k, got, want)
				}
			}
			sides := plain(eval[string](t, b, `document.getElementById('compare-sides').textContent`))
			for _, want := range []string{"A: gpt-4o (app=<b>bold</b>, team=chat) · openai, 2,400 requests", "B: claude-haiku-4-5 (team=search) · anthropic", "over the last 5 minutes"} {
				if !strings.Contains(sides, want) {
					t.Errorf("sides %q do not say %q", sides, want)
				}
			}
			if eval[int](t, b, `document.querySelectorAll('#compare b, #compare-sides b').length`) != 0 {
				t.Error("a label value was written as HTML")
			}
		}},
		{"compare: the intervals, naive ratios and coverage show the answer's numbers", func(t *testing.T) {
			for _, m := range metrics {
				got := eval[[]renderedRatio](t, b, `(`+readRatios+`)(`+jsString(m.id)+`)`)
				table := eval[map[string]compareTableRow](t, b, `(`+readCompareTable+`)(`+jsString(m.id)+`)`)
				one := eval[float64](t, b, `+document.querySelector('#`+m.id+` line.one').getAttribute('x1')`)
				if len(got) != 2 {
					t.Fatalf("%s: %d quantiles drawn, want p50 and p95", m.id, len(got))
				}
				for _, r := range got {
					want, ok := fair.metric(m.metric, r.Quantile)
					if !ok || want.Fair == nil || want.Naive == nil {
						t.Fatalf("the fixture has no fair and naive %s %s", m.metric, r.Quantile)
					}
					if r.Fair != fmt.Sprint(want.Fair.Ratio) || r.Low != fmt.Sprint(want.Fair.Low) || r.High != fmt.Sprint(want.Fair.High) || r.Naive != fmt.Sprint(*want.Naive) {
						t.Errorf("%s %s: drew %+v, want %+v naive %v", m.id, r.Quantile, r, *want.Fair, *want.Naive)
					}
					// The fixture's fair ratios are all B faster, with intervals clear of 1.
					if r.Verdict != "faster" {
						t.Errorf("%s %s: verdict %q, want faster", m.id, r.Quantile, r.Verdict)
					}
					// A log axis: each mark as far from 1 as its log says,
					// on the side where B is faster or slower.
					k := (r.MidX - one) / math.Log(want.Fair.Ratio)
					if k <= 0 {
						t.Errorf("%s %s: ratio %v drawn at x %v, 1 at %v: on the wrong side", m.id, r.Quantile, want.Fair.Ratio, r.MidX, one)
					}
					for _, p := range []struct {
						what string
						x, v float64
					}{{"interval's low end", r.RectX, want.Fair.Low}, {"interval's high end", r.RectX + r.RectW, want.Fair.High}, {"naive marker", r.NaiveX, *want.Naive}} {
						if wantX := one + k*math.Log(p.v); math.Abs(p.x-wantX) > 0.6 {
							t.Errorf("%s %s: %s at x %.1f, want %.1f for %v on the log axis", m.id, r.Quantile, p.what, p.x, wantX, p.v)
						}
					}
					row := table[r.Quantile]
					for col, wantText := range map[string]string{
						"verdict": "faster", "fair": fmtRatio(want.Fair.Ratio),
						"interval":   fmtRatio(want.Fair.Low) + "–" + fmtRatio(want.Fair.High),
						"naive":      fmtRatio(*want.Naive),
						"coverage_a": fmtShare(want.CoverageA), "coverage_b": fmtShare(want.CoverageB),
					} {
						if g := plain(row[col].Text); g != wantText {
							t.Errorf("%s %s %s: %q, want %q", m.id, r.Quantile, col, g, wantText)
						}
					}
				}
				sides := eval[[]string](t, b, `[...document.querySelectorAll('#`+m.id+` text.side')].map(t => t.textContent)`)
				want := []string{"← B slower", "B faster →"}
				if m.lowerIsBetter {
					want = []string{"← B faster", "B slower →"}
				}
				if !slices.Equal(sides, want) {
					t.Errorf("%s: sides labelled %q, want %q", m.id, sides, want)
				}
				if label := eval[string](t, b, `document.getElementById('`+m.id+`').getAttribute('aria-label')`); !strings.Contains(label, "p50: B/A "+fmtRatio(mustMetric(t, fair, m.metric, "p50").Fair.Ratio)) {
					t.Errorf("%s: text alternative %q lacks the p50 ratio", m.id, label)
				}
				checkCells(t, b, m.id, m.metric, fair)
			}
			if os.Getenv("TOKENTAP_ARTIFACTS") != "" {
				eval[bool](t, b, `(document.getElementById('compare').scrollIntoView(), true)`)
				b.Screenshot(t, "page-compare.png")
				eval[bool](t, b, `(window.scrollTo(0, 0), true)`)
			}
		}},
		{"compare: a comparison with nothing shared says why, with no number", func(t *testing.T) {
			api.serveCompare(apart)
			b.waitFor(t, "the reasons", `document.querySelectorAll('#compare g[data-not-comparable]').length === 4`, 10*time.Second)
			for _, m := range metrics {
				got := eval[[]renderedRatio](t, b, `(`+readRatios+`)(`+jsString(m.id)+`)`)
				table := eval[map[string]compareTableRow](t, b, `(`+readCompareTable+`)(`+jsString(m.id)+`)`)
				for _, r := range got {
					want := mustMetric(t, apart, m.metric, r.Quantile)
					if r.NotComparable != "not comparable: "+want.NotComparable || r.Bars != 0 || r.Fair != "" {
						t.Errorf("%s %s: %+v, want the reason %q and no interval", m.id, r.Quantile, r, want.NotComparable)
					}
					cell := table[r.Quantile]["fair"]
					if cell.Text != "not comparable: "+want.NotComparable || cell.Value != "" || regexp.MustCompile(`\d`).MatchString(cell.Text) {
						t.Errorf("%s %s: fair cell %+v, want the reason and no number", m.id, r.Quantile, cell)
					}
					if _, ok := table[r.Quantile]["interval"]; ok {
						t.Errorf("%s %s: an interval shown for a comparison without one", m.id, r.Quantile)
					}
				}
				checkCells(t, b, m.id, m.metric, apart)
			}
		}},
		{"compare: an error of the API is shown in the section", func(t *testing.T) {
			api.failCompare(http.StatusBadRequest, `{"error":"A (`+fair.A.Selector+`): no row in the last 5m"}`)
			b.waitFor(t, "the error", `document.getElementById('compare').dataset.state === 'error'`, 10*time.Second)
			msg := eval[string](t, b, `document.getElementById('compare-message').textContent`)
			if !strings.Contains(msg, "HTTP 400") || !strings.Contains(msg, "no row in the last 5m") {
				t.Errorf("message %q does not give the API's reason", msg)
			}
			if !eval[bool](t, b, `document.getElementById('compare-result').hidden`) {
				t.Error("the last comparison stays shown beside the error")
			}
			api.serveCompare(fair)
			waitCompare(t, "the comparison again")
		}},
		{"compare: windows without strata say so and ask nothing", func(t *testing.T) {
			for _, w := range []struct{ window, words string }{{"1m", "The last minute keeps no strata"}, {"24h", "The last 24 hours keeps no strata"}} {
				before := len(api.compareQueries())
				b.do(t, "choosing "+w.window, 10*time.Second, chromedp.Click(chromedp.CSS(`input[name="window"][value="`+w.window+`"]`)))
				// The state is 'window' already when one such window
				// follows another: wait for this window's words.
				b.waitFor(t, "the no-strata message", `document.getElementById('compare').dataset.state === 'window' && document.getElementById('compare-message').textContent.startsWith(`+jsString(w.words)+`)`, 10*time.Second)
				if msg := eval[string](t, b, `document.getElementById('compare-message').textContent`); !strings.HasPrefix(msg, w.words) || !strings.Contains(msg, "5 min or 1 hour") {
					t.Errorf("message %q, want %q and the windows that can compare", msg, w.words)
				}
				b.waitFor(t, "a refresh", `+document.body.dataset.loads > `+eval[string](t, b, `document.body.dataset.loads`), 10*time.Second)
				if qs := api.compareQueries(); len(qs) != before {
					t.Errorf("asked %v in the %s window", qs[before:], w.window)
				}
			}
			b.do(t, "choosing 1h", 10*time.Second, chromedp.Click(chromedp.CSS(`input[name="window"][value="1h"]`)))
			waitCompare(t, "the comparison in 1h")
			if qs := api.compareQueries(); qs[len(qs)-1].Get("window") != "1h" {
				t.Errorf("asked window %q, want 1h", qs[len(qs)-1].Get("window"))
			}
			b.do(t, "choosing 5m", 10*time.Second, chromedp.Click(chromedp.CSS(`input[name="window"][value="5m"]`)))
			waitCompare(t, "the comparison in 5m")
		}},
		{"compare: the address keeps the choice, so a reload shows the same comparison", func(t *testing.T) {
			addr := eval[map[string]string](t, b, `Object.fromEntries(new URLSearchParams(location.search))`)
			if addr["a"] != fair.A.Selector || addr["b"] != fair.B.Selector {
				t.Fatalf("the address says a=%q b=%q, want %q and %q", addr["a"], addr["b"], fair.A.Selector, fair.B.Selector)
			}
			before := len(api.compareQueries())
			eval[bool](t, b, `window.tokentapBeforeReload = true`)
			b.do(t, "reloading", 20*time.Second, chromedp.Reload())
			b.waitFor(t, "the comparison after the reload", `window.tokentapBeforeReload === undefined && document.getElementById('compare').dataset.state === 'ok'`, 10*time.Second)
			if got := eval[[]string](t, b, `[document.getElementById('compare-a').value, document.getElementById('compare-b').value]`); !slices.Equal(got, []string{fair.A.Selector, fair.B.Selector}) {
				t.Errorf("after the reload the selects say %q", got)
			}
			qs := api.compareQueries()
			if len(qs) == before || qs[before].Get("a") != fair.A.Selector || qs[before].Get("b") != fair.B.Selector {
				t.Errorf("after the reload asked %v", qs[before:])
			}
		}},
	}
}

func mustMetric(t *testing.T, d compareDoc, metric, q string) compareMetric {
	t.Helper()
	m, ok := d.metric(metric, q)
	if !ok {
		t.Fatalf("the fixture has no %s %s", metric, q)
	}
	return m
}

// checkCells compares the cell grid of one metric with the answer's cells
// at p50: every cell drawn with both sides' counts, the counted ones with
// their ratio, the others greyed.
func checkCells(t *testing.T, b *browser, id, metric string, d compareDoc) {
	t.Helper()
	type cell struct {
		A     string `json:"a"`
		B     string `json:"b"`
		Ratio string `json:"ratio"`
		Thin  bool   `json:"thin"`
		Text  string `json:"text"`
	}
	got := eval[[]cell](t, b, `[...document.querySelectorAll('#`+id+`-cells g.cell')].map(g => ({a: g.dataset.a, b: g.dataset.b, ratio: g.dataset.ratio, thin: g.classList.contains('thin'), text: g.querySelector('text.ratio').textContent}))`)
	if len(got) != len(d.Cells) {
		t.Fatalf("%s: %d cells drawn, want %d", id, len(got), len(d.Cells))
	}
	counted := 0
	for i, c := range d.Cells {
		j := slices.IndexFunc(c.Metrics, func(m compareCellMetric) bool { return m.Metric == metric && m.Quantile == "p50" })
		m := c.Metrics[j]
		want := cell{A: fmt.Sprint(m.CountA), B: fmt.Sprint(m.CountB), Thin: m.Ratio == nil, Text: "–"}
		if m.Ratio != nil {
			counted++
			want.Ratio, want.Text = fmt.Sprint(m.Ratio.Ratio), fmtRatio(m.Ratio.Ratio)
		}
		if got[i] != want {
			t.Errorf("%s cell %d (%d in flight, %d tokens): %+v, want %+v", id, i, c.InflightMin, c.InputMin, got[i], want)
		}
	}
	if n := eval[int](t, b, `document.querySelectorAll('#`+id+`-cells g.cell:not(.thin)').length`); n != counted {
		t.Errorf("%s: %d cells counted, want %d", id, n, counted)
	}
}
