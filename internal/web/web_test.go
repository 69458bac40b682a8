package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/web"
)

func get(t *testing.T, method, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	web.Handler().ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestHandler: what the page's files are served with. The content types
// must not depend on the host's MIME tables (a script served as text/plain
// does not run under nosniff); no-cache with an ETag keeps a browser from
// mixing an old script with a new page after an upgrade; the CSP is what
// keeps a model name from running as script on the admin API's origin.
func TestHandler(t *testing.T) {
	cases := []struct {
		name        string
		method      string
		path        string
		status      int
		contentType string
		bodyHas     string
	}{
		{"the page at the root", "GET", "/", 200, "text/html; charset=utf-8", `<script type="module" src="page.js"`},
		{"the page by name", "GET", "/index.html", 200, "text/html; charset=utf-8", "<table"},
		{"the script", "GET", "/page.js", 200, "text/javascript; charset=utf-8", "use strict"},
		{"the style", "GET", "/page.css", 200, "text/css; charset=utf-8", "font-variant-numeric"},
		{"HEAD has headers and no body", "HEAD", "/page.js", 200, "text/javascript; charset=utf-8", ""},
		{"an unknown file", "GET", "/app.js", 404, "text/plain; charset=utf-8", "no such page asset"},
		{"no way out of the embedded tree", "GET", "/../web.go", 404, "text/plain; charset=utf-8", "no such page asset"},
		{"no directory listing", "GET", "/testdata/", 404, "text/plain; charset=utf-8", "no such page asset"},
		{"read-only", "POST", "/", 405, "text/plain; charset=utf-8", "read-only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, c.method, c.path, nil)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, c.status, body)
			}
			if got := resp.Header.Get("Content-Type"); got != c.contentType {
				t.Errorf("Content-Type %q, want %q", got, c.contentType)
			}
			if !strings.Contains(body, c.bodyHas) {
				t.Errorf("body does not contain %q:\n%.300s", c.bodyHas, body)
			}
			if c.method == "HEAD" && body != "" {
				t.Errorf("HEAD sent a body of %d bytes", len(body))
			}
			if c.status == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q, want GET, HEAD", resp.Header.Get("Allow"))
			}
			if c.status != 200 {
				return
			}
			for k, want := range map[string]string{
				"Cache-Control":          "no-cache",
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "same-origin",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s %q, want %q", k, got, want)
				}
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy %q allows inline or eval'd code", csp)
			}
			if resp.Header.Get("ETag") == "" {
				t.Error("no ETag")
			}
		})
	}
}

// TestRevalidation: a browser revalidating an unchanged file gets 304, and
// each file has its own ETag.
func TestRevalidation(t *testing.T) {
	seen := map[string]string{}
	for _, path := range []string{"/", "/page.js", "/page.css"} {
		resp, _ := get(t, "GET", path, nil)
		etag := resp.Header.Get("ETag")
		if other, dup := seen[etag]; dup {
			t.Errorf("%s and %s share the ETag %s", path, other, etag)
		}
		seen[etag] = path
		again, body := get(t, "GET", path, map[string]string{"If-None-Match": etag})
		if again.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("%s with If-None-Match: status %d, %d bytes; want 304 and none", path, again.StatusCode, len(body))
		}
		changed, _ := get(t, "GET", path, map[string]string{"If-None-Match": `"stale"`})
		if changed.StatusCode != http.StatusOK {
			t.Errorf("%s with a stale ETag: status %d, want 200", path, changed.StatusCode)
		}
	}
}

// TestOffline: the page loads nothing from elsewhere (it must work on a
// machine without internet, and its CSP would block it anyway), and every
// file the page names is served.
func TestOffline(t *testing.T) {
	_, page := get(t, "GET", "/", nil)
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 2 {
		t.Fatalf("found %d references in the page, expected at least its script and style", len(refs))
	}
	files := []string{"/"}
	for _, m := range refs {
		ref := m[1]
		switch {
		case strings.HasPrefix(ref, "data:"), strings.HasPrefix(ref, "stats?"):
			// inline, or the API the admin route serves next to the page
		case strings.Contains(ref, "//"):
			t.Errorf("the page loads %q from another origin", ref)
		default:
			resp, _ := get(t, "GET", "/"+ref, nil)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the page names %q, which is not served (status %d)", ref, resp.StatusCode)
			}
			files = append(files, "/"+ref)
		}
	}
	// The SVG namespace is a name, not a fetch.
	external := regexp.MustCompile(`(?:https?:)?//[a-zA-Z0-9.-]+\.[a-z]{2,}`)
	for _, f := range files {
		_, body := get(t, "GET", f, nil)
		body = strings.ReplaceAll(body, "http://www.w3.org/2000/svg", "")
		for _, m := range external.FindAllString(body, -1) {
			t.Errorf("%s refers to %q; the page must work offline", f, m)
		}
	}
}
