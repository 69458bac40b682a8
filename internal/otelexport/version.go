package otelexport

import (
	"runtime/debug"
	"sync"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName is the OpenTelemetry instrumentation scope of
// tokentap's spans and metrics.
const InstrumentationName = "github.com/tokentap/tokentap"

// SchemaURL is the schema of the semantic conventions tokentap's attributes
// and metrics follow, carried by its tracer and meter so that a backend (or
// a Collector's schema processor) knows the version.
const SchemaURL = semconv.SchemaURL

// Tracer is tokentap's tracer from tp: its scope, version and schema.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	return tp.Tracer(InstrumentationName, trace.WithInstrumentationVersion(Version()), trace.WithSchemaURL(SchemaURL))
}

// Version is the module version from the build info, so spans say which
// tokentap produced them.
var Version = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/tokentap/tokentap" {
				return dep.Version
			}
		}
		if bi.Main.Path == "github.com/tokentap/tokentap" && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "(devel)"
})
