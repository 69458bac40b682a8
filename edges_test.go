package tokentap

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPackageEdges holds the layering docs/ARCHITECTURE.md describes: the
// measuring, its framing, the stats, the load generator and the
// OpenTelemetry export build without Caddy, and the measuring and the
// stats without OpenTelemetry either, so that each can be used, and
// tested, on its own.
func TestPackageEdges(t *testing.T) {
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"./meter", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./sse", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./stats", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./sink", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./ndjson", []string{"github.com/caddyserver/"}},
		{"./jsonarray", []string{"github.com/caddyserver/"}},
		{"./eventstream", []string{"github.com/caddyserver/"}},
		{"./capture", []string{"github.com/caddyserver/"}},
		{"./loadgen", []string{"github.com/caddyserver/"}},
		{"./otelexport", []string{"github.com/caddyserver/"}},
		{"./injectusage", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./simstamp", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./cost", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		// go test ./meter stays fast: its tests link no Caddy either.
		{"-test ./meter", []string{"github.com/caddyserver/"}},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.pkg, "./", ""), func(t *testing.T) {
			args := append([]string{"list", "-deps"}, strings.Fields(tt.pkg)...)
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", tt.pkg, err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range tt.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s", tt.pkg, dep)
					}
				}
			}
		})
	}
}
