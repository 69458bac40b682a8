// Package headless starts the real headless Chromium that the live page's
// and the load report's tests drive, and collects what a page logged and
// fetched, so every page test looks for problems the same way.
//
// CI installs Chromium and sets TOKENTAP_REQUIRE_BROWSER=1: there a missing
// browser fails the test instead of skipping it quietly.
package headless

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumCandidates are where Debian, Ubuntu and Google put the browser.
var chromiumCandidates = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Chromium finds a Chromium, or skips the test when there is none and none
// is required.
func Chromium(t testing.TB) string {
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

// Options say which console messages count as problems.
type Options struct {
	// Warnings counts console warnings too: a self-contained report has no
	// reason to warn about anything.
	Warnings bool
	// NetworkErrors counts failed requests logged by the network source.
	// The live page's tests provoke those on purpose and check the page's
	// own message instead.
	NetworkErrors bool
}

// Tab is one headless Chromium tab with what its pages logged and fetched.
type Tab struct {
	// Ctx is the tab's context. It has no deadline: give each step its
	// own, so a page that never reaches a state fails instead of hanging.
	Ctx context.Context

	mu       sync.Mutex
	problems []string
	requests []string
}

// Open starts Chromium with a fresh profile and a 1366x768 window, the
// laptop screen the pages are laid out for. The flags keep it off the
// network (this machine has none, and Chromium would keep trying) and let it
// run as root in a container. The browser is stopped when the test ends.
func Open(t testing.TB, o Options) *Tab {
	t.Helper()
	path := Chromium(t)
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
	// The first Run starts the browser and binds it to ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	tb := &Tab{Ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			tb.mu.Lock()
			tb.requests = append(tb.requests, e.Request.URL)
			tb.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			problem := m.IsException() || m.Source == "security" || m.Source == "javascript" ||
				(m.Type == chromedp.ConsoleError && (o.NetworkErrors || m.Source != "network")) ||
				(o.Warnings && m.Type == chromedp.ConsoleWarning)
			if problem {
				tb.mu.Lock()
				tb.problems = append(tb.problems, string(m.Type)+" "+m.Source+": "+m.String())
				tb.mu.Unlock()
			}
		}
	}()
	return tb
}

// Problems are the exceptions, CSP violations and script errors (and what
// Options added) logged since the tab opened or was last Reset.
func (tb *Tab) Problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...)
}

// Requests are the URLs the tab fetched since it opened or was last Reset.
func (tb *Tab) Requests() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.requests...)
}

// Reset forgets the problems and requests so far, before the next page.
func (tb *Tab) Reset() {
	tb.mu.Lock()
	tb.problems, tb.requests = nil, nil
	tb.mu.Unlock()
}

// CheckClean fails the test for every problem the tab logged.
func (tb *Tab) CheckClean(t testing.TB) {
	t.Helper()
	for _, p := range tb.Problems() {
		t.Errorf("the page logged a problem: %s", p)
	}
}

// Run runs one action with a deadline and fails the test if it fails.
func Run[T any](t testing.TB, tb *Tab, what string, timeout time.Duration, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// Screenshot saves what the window shows as a PNG test artefact and
// returns its path, which it logs.
func (tb *Tab) Screenshot(t testing.TB, name string) string {
	t.Helper()
	png := Run(t, tb, "screenshot", 20*time.Second, chromedp.CaptureScreenshot())
	path := Artifact(t, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// Artifact is where a test artefact named name goes: into
// $TOKENTAP_ARTIFACTS when it is set (CI keeps that directory), else into
// the test's temporary directory.
func Artifact(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("TOKENTAP_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}
