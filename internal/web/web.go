// Package web holds tokentap's live comparison page: static assets embedded
// in the binary, so the page works offline, served by the admin API at
// /tokentap/.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page nothing but its own files and
// requests to its own origin. The page runs on the admin API's origin, where
// a script could rewrite the whole config, and it shows model names and
// label values that clients chose; so no inline script, no inline style
// attribute, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes names the types of the files the page is made of, so they
// do not depend on the host's MIME tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	// etag is a hash of the body, so a browser revalidating gets 304
	// until a new build changes the file.
	etag string
}

// page serves the embedded assets by name.
type page struct {
	files map[string]asset
}

var handler = load()

// Handler serves the page's assets: "/" is the page, every other file by
// its name. Mount it with the prefix stripped (the admin API strips
// /tokentap), so the page's relative URLs, including its stats requests,
// resolve under the same prefix.
func Handler() http.Handler {
	return handler
}

// load reads the embedded tree once. It cannot fail at run time: the tree is
// fixed at build time, and the package's tests read every file.
func load() *page {
	p := &page{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		p.files[strings.TrimPrefix(name, "assets/")] = asset{
			body:        body,
			contentType: contentType(name),
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error())
	}
	return p
}

func contentType(name string) string {
	ext := path.Ext(name)
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// ServeHTTP answers GET and HEAD for the embedded files. Nothing is listed
// and nothing outside the embedded tree can be named: the cleaned path is
// only a key into the map.
func (p *page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	a, ok := p.files[name]
	if !ok {
		http.Error(w, "tokentap: no such page asset: "+name, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "tokentap: the page is read-only; use GET", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	// no-cache, not a max-age: the files are tiny and come from the
	// admin API on the same machine, and after an upgrade a browser must
	// never mix an old script with a new page. The ETag makes the
	// revalidation a 304.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	// Caddy's admin API checks the Origin, or else the Referer, of every
	// request a browser makes. same-origin keeps the full Referer on the
	// page's own requests (its stats polls, its script and style) so
	// they pass, and sends none to other sites.
	h.Set("Referrer-Policy", "same-origin")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
