package caddymodule

import (
	"runtime/debug"
	"sync"
)

// instrumentationName is the OpenTelemetry instrumentation scope of
// tokentap's spans and metrics.
const instrumentationName = "github.com/tokentap/tokentap"

// version is the module version from the build info, so spans say which
// tokentap produced them.
var version = sync.OnceValue(func() string {
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
