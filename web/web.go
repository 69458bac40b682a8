// Package web holds tokentap's live comparison page: static assets embedded
// in the binary, so the page works offline, served by the admin API at
// /tokentap/.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Handler serves the page's assets. Mount it with the prefix stripped, so
// that "/" is the page itself.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.FileServer(http.FS(sub))
}
