// Package cost prices an exchange's token counts: prices per model, per
// million tokens, from the Caddyfile or from a pricing file in the format
// LiteLLM publishes (model_prices_and_context_window.json), and the cost in
// US dollars of one exchange's usage. No price list ships with tokentap:
// prices change, and the user's own list is the one that is right for them.
//
// The package knows neither Caddy nor OpenTelemetry; the adapter asks it
// for each finished exchange's cost and the sinks report it.
package cost
