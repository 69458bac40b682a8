package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tokentap/tokentap/internal/exchange"
)

// caddyHost answers for Caddy what package exchange cannot know by itself.
var caddyHost = exchange.Host{
	Upstream:     upstream,
	Replace:      replace,
	OriginalPath: originalPath,
	ErrorType:    handlerErrorType,
}

// upstream is the host and port reverse_proxy chose, once it set them.
func upstream(r *http.Request) (host string, port int) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return "", 0
	}
	host, _ = repl.GetString("http.reverse_proxy.upstream.host")
	if p, ok := repl.GetString("http.reverse_proxy.upstream.port"); ok {
		port, _ = strconv.Atoi(p)
	}
	return host, port
}

// replace evaluates a template's Caddy placeholders for r; unknown ones
// become empty.
func replace(r *http.Request, template string) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return template
	}
	return repl.ReplaceAll(template, "")
}

// originalPath is the path the client asked for: handle_path strips its
// prefix from r's, and Caddy keeps the request as it arrived.
func originalPath(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.Path
	}
	return r.URL.Path
}

// handlerErrorType names an error returned by the next handler: the HTTP
// status Caddy will answer with (e.g. 502 when the upstream is down), else
// _OTHER.
func handlerErrorType(err error) string {
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		return fmt.Sprint(he.StatusCode)
	}
	return "_OTHER"
}
