package otelexport

import (
	"runtime/debug"
	"sync"
)

// InstrumentationName is the OpenTelemetry instrumentation scope of
// tokentap's spans and metrics.
const InstrumentationName = "github.com/tokentap/tokentap"

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
