// Command tokentap is Caddy with its standard modules plus tokentap's
// measuring handler and its built-in LLM simulator.
//
// It is a drop-in Caddy binary: every caddy subcommand works, and
// `tokentap run` in the repository root serves the default Caddyfile.
package main

import (
	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokentap/tokentap/caddymodule"
	_ "github.com/tokentap/tokentap/internal/simulator"
)

// longDescription is what `tokentap help` says first: Caddy's own text
// tells a user to run `caddy`, which is not this binary's name.
const longDescription = `tokentap is Caddy with a measuring reverse proxy for LLM APIs.

It passes every byte between your application and its OpenAI, Anthropic,
Gemini, Ollama, Bedrock, ... endpoint through unchanged, reads the streams
as they pass, and reports per-request token counts, time to first token and
output tokens per second as OpenTelemetry spans and metrics, on Caddy's
/metrics, and on its own live page.

Run it on the Caddyfile in the current directory:

	$ tokentap run

Compare the models it measured, live:

	$ tokentap stats

Every Caddy subcommand works, and every Caddy module of the standard
distribution is built in: see https://caddyserver.com/docs/command-line.`

func main() {
	// Caddy names its root command and its usage lines from these.
	caddy.CustomBinaryName = "tokentap"
	caddy.CustomLongDescription = longDescription
	caddycmd.Main()
}
