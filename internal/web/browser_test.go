package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tokentap/tokentap/internal/testutil/headless"
)

// The browser tests drive a real headless Chromium (internal/headless).

// browser is one headless Chromium tab with what it logged.
type browser struct {
	*headless.Tab
	ctx context.Context
}

// newBrowser opens the tab. Failed requests are not problems here: the
// tests provoke those on purpose and check the page's own message instead.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	tb := headless.Open(t, headless.Options{})
	return &browser{Tab: tb, ctx: tb.Ctx}
}

// do runs steps with a deadline, so a page that never reaches the expected
// state fails the test instead of hanging it.
func (b *browser) do(t *testing.T, what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression and decodes its JSON value.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it holds.
func (b *browser) waitFor(t *testing.T, what, predicate string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v; the page says: %s", what, predicate, err, b.pageState(t))
	}
}

// pageState describes the page for a failure message.
func (b *browser) pageState(t *testing.T) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({state: document.body.dataset.state, loads: document.body.dataset.loads, status: document.getElementById('status').textContent, message: document.getElementById('message').textContent, rows: [...document.querySelectorAll('#comparison tbody tr')].map(r => r.dataset.model)})`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// navigate opens url as if the user had followed a link from referrer.
//
// Caddy's admin API answers 403 to a browser request that carries
// Sec-Fetch-Mode but neither Origin nor Referer, and a top-level navigation
// typed into the address bar is exactly that. With a Referer from the admin
// origin itself the check passes, as it does for every request the page
// then makes (the page's Referrer-Policy keeps them).
func (b *browser) navigate(t *testing.T, url, referrer string) {
	t.Helper()
	b.do(t, "opening "+url, 30*time.Second,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			res, err := cdp.Call(ctx, tg, page.Navigate, page.NavigateParams{URL: url, Referrer: referrer})
			if err == nil && res.ErrorText != "" {
				err = &chromedp.LoadError{ErrorText: res.ErrorText}
			}
			return err
		}),
	)
	b.waitFor(t, "the page to load", `document.readyState === 'complete' && location.href.startsWith(`+jsString(strings.SplitN(url, "?", 2)[0])+`)`, 20*time.Second)
}

// renderedRow is one row of the comparison table as the page shows it.
type renderedRow struct {
	Provider string                  `json:"provider"`
	Model    string                  `json:"model"`
	Labels   string                  `json:"labels"`
	Overflow bool                    `json:"overflow"`
	Cells    map[string]renderedCell `json:"cells"`
}

// renderedCell is a cell's text and its raw value (data-value; "" for a
// missing value).
type renderedCell struct {
	Text  string `json:"text"`
	Value string `json:"value"`
}

const readRows = `[...document.querySelectorAll('#comparison tbody tr')].map(tr => ({
	provider: tr.dataset.provider, model: tr.dataset.model, labels: tr.dataset.labels,
	overflow: tr.dataset.overflow === 'true',
	cells: Object.fromEntries([...tr.children].map(c => [c.dataset.col, {text: c.textContent, value: c.dataset.value}])),
}))`

func rows(t *testing.T, b *browser) []renderedRow {
	t.Helper()
	return eval[[]renderedRow](t, b, readRows)
}

func models(rs []renderedRow) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Model
		if r.Labels != "" {
			out[i] += " {" + r.Labels + "}"
		}
	}
	return out
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
