package web_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive a real headless Chromium. CI installs it and sets
// TOKENTAP_REQUIRE_BROWSER=1, so there a missing browser fails the test
// instead of skipping it quietly.

// chromiumCandidates are where Debian, Ubuntu and Google put the browser.
var chromiumCandidates = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromiumPath finds a Chromium, or skips the test when there is none and
// none is required.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, c := range chromiumCandidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "no Chromium found (looked for " + strings.Join(chromiumCandidates, ", ") + "); install it with `apt-get install -y chromium`"
	if os.Getenv("TOKENTAP_REQUIRE_BROWSER") != "" {
		t.Fatal(msg + ", and TOKENTAP_REQUIRE_BROWSER is set")
	}
	t.Skip(msg + "; set TOKENTAP_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// browser is one headless Chromium tab with what it logged.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string // exceptions, CSP violations and script errors
}

// newBrowser starts Chromium with a fresh profile and a 1366x768 window,
// the laptop screen the page is laid out for. The flags keep it off the
// network (this machine has none, and Chromium would keep trying) and let it
// run as root in a container.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	profile := t.TempDir() // removed after the browser has exited (cleanups run in reverse)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1366, 768),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first Run starts the browser and binds it to ctx, which has no
	// deadline; each step gets its own below.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Failed requests are logged by the network source; the
			// tests provoke those on purpose and check the page's
			// own message instead.
			if m.IsException() || m.Source == "security" || m.Source == "javascript" ||
				(m.Type == chromedp.ConsoleError && m.Source != "network") {
				b.mu.Lock()
				b.problems = append(b.problems, string(m.Type)+" "+m.Source+": "+m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
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

// checkClean fails the test if the page threw, broke its CSP or logged a
// script error.
func (b *browser) checkClean(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("the page logged a problem: %s", p)
	}
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

// screenshot saves what the 1366x768 window shows as a PNG test artefact:
// into $TOKENTAP_ARTIFACTS when it is set (CI keeps that directory), else
// into the test's temporary directory. It returns the path, which it logs.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("TOKENTAP_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
