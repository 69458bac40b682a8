// Command otelcol is an OpenTelemetry Collector with the components
// tokentap's examples use: OTLP in, batching, OTLP out (to Jaeger), and
// Prometheus out, with the spanmetrics connector that turns spans into
// request and duration metrics.
//
// It is what the Collector's builder (ocb) generates from a manifest
// listing these components, written out by hand so that it builds with
// plain `go build` from the Go module proxy, with no extra tool. The
// versions are those Jaeger v2 (test/tools/jaeger) already depends on, so the
// two builds share Go's build cache: after Jaeger, this takes seconds.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "OpenTelemetry Collector for tokentap's examples",
			Version:     "0.140.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
				// A bare --config path is a file.
				DefaultScheme: "env",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
