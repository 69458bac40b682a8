// Package tokentap plugs tokentap's Caddy modules into a Caddy build, so
// that `xcaddy build --with github.com/tokentap/tokentap` gives a Caddy with
// the tokentap handler and the tokentap_simulator. The code lives in the
// caddymodule, meter, sse and simulator packages.
package tokentap

import (
	_ "github.com/tokentap/tokentap/caddymodule"
	_ "github.com/tokentap/tokentap/internal/simulator"
)
