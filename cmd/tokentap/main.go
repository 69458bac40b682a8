// Command tokentap is Caddy with its standard modules plus tokentap's
// measuring handler and its built-in LLM simulator.
//
// It is a drop-in Caddy binary: every caddy subcommand works, and
// `tokentap run` in the repository root serves the default Caddyfile.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokentap/tokentap/caddymodule"
	_ "github.com/tokentap/tokentap/simulator"
)

func main() {
	caddycmd.Main()
}
