package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// composeFile is the part of a compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		DependsOn   []string          `yaml:"depends_on"`
	} `yaml:"services"`
}

// TestComposeFile checks examples/compose/docker-compose.yaml, which cannot
// be run here (no Docker daemon, no image registry), against what can: it
// parses, its services are those of examples/collector, what it mounts and
// builds from exists, it publishes the ports that examples/collector/run.sh
// uses by default (so that one README's requests work on both), the
// Collector's addresses are set for containers, the tokentap instances
// export to the Collector, and its images are the releases that test/tools/jaeger
// and test/tools/otelcol build.
func TestComposeFile(t *testing.T) {
	root := testbin.RepoRoot(t)
	dir := filepath.Join(root, "examples", "compose")
	raw, err := os.ReadFile(filepath.Join(dir, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yaml does not parse: %v", err)
	}

	names := make([]string, 0, len(c.Services))
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"collector", "jaeger", "lb", "simulator", "tokentap-a", "tokentap-b"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}

	runDefaults := composeScriptDefaults(t, filepath.Join(root, "examples", "collector", "run.sh"))
	hostPort := func(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }
	tests := []struct {
		name, service, port string
	}{
		{"the load balancer", "lb", runDefaults["LB_PORT"]},
		{"Jaeger's query API and UI", "jaeger", hostPort(runDefaults["JAEGER_QUERY_HTTP"])},
		{"the Prometheus endpoint", "collector", hostPort(runDefaults["PROMETHEUS_ENDPOINT"])},
	}
	for _, tt := range tests {
		t.Run("publishes "+tt.name, func(t *testing.T) {
			if tt.port == "" {
				t.Fatal("run.sh has no default for it")
			}
			if want := tt.port + ":" + tt.port; !slices.Contains(c.Services[tt.service].Ports, want) {
				t.Errorf("%s publishes %v, want %s as examples/collector/run.sh uses", tt.service, c.Services[tt.service].Ports, want)
			}
		})
	}

	t.Run("files", func(t *testing.T) {
		for _, name := range []string{"simulator", "tokentap-a", "tokentap-b", "lb"} {
			if s := c.Services[name]; s.Build == nil || s.Image != "tokentap:local" {
				t.Errorf("%s must run tokentap's image, built from the repository (the x-tokentap anchor)", name)
			}
		}
		for name, s := range c.Services {
			for _, v := range s.Volumes {
				src, _, _ := strings.Cut(v, ":")
				if _, err := os.Stat(filepath.Join(dir, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			}
			if s.Build == nil && s.Image == "tokentap:local" {
				t.Errorf("%s runs tokentap's image but does not build it", name)
			}
			if s.Image == "" {
				t.Errorf("%s has no image", name)
			}
			if s.Build != nil {
				if _, err := os.Stat(filepath.Join(dir, s.Build.Context, s.Build.Dockerfile)); err != nil {
					t.Errorf("%s builds from %s: %v", name, s.Build.Dockerfile, err)
				}
			}
			for _, d := range s.DependsOn {
				if _, ok := c.Services[d]; !ok {
					t.Errorf("%s depends on %s, which is not a service", name, d)
				}
			}
		}
	})

	t.Run("collector addresses", func(t *testing.T) {
		env := c.Services["collector"].Environment
		config, err := os.ReadFile(filepath.Join(root, "examples", "collector", "otelcol.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// Every address otelcol.yaml reads from the environment is set,
		// on all interfaces (a container's loopback is its own), except
		// Jaeger's, which is the jaeger service.
		for _, m := range regexp.MustCompile(`\$\{env:(\w+):-`).FindAllStringSubmatch(string(config), -1) {
			v, ok := env[m[1]]
			switch {
			case !ok:
				t.Errorf("the collector service does not set %s", m[1])
			case m[1] == "JAEGER_OTLP_GRPC":
				if v != "jaeger:4317" {
					t.Errorf("JAEGER_OTLP_GRPC=%s, want jaeger:4317 (the jaeger service's OTLP gRPC port)", v)
				}
			case !strings.HasPrefix(v, "0.0.0.0:"):
				t.Errorf("%s=%s, want 0.0.0.0:<port>", m[1], v)
			}
		}
		for _, inst := range []string{"tokentap-a", "tokentap-b"} {
			e := c.Services[inst].Environment
			if want := "http://collector:" + hostPort(env["OTELCOL_OTLP_GRPC"]); e["OTEL_EXPORTER_OTLP_ENDPOINT"] != want {
				t.Errorf("%s exports to %q, want %s", inst, e["OTEL_EXPORTER_OTLP_ENDPOINT"], want)
			}
			if want := "service.instance.id=" + inst; e["OTEL_RESOURCE_ATTRIBUTES"] != want {
				t.Errorf("%s: OTEL_RESOURCE_ATTRIBUTES=%q, want %q", inst, e["OTEL_RESOURCE_ATTRIBUTES"], want)
			}
		}
	})

	t.Run("image versions", func(t *testing.T) {
		// Jaeger releases v2.N with its Go module at v1.(N+63).
		jaegerModule := composeModuleVersion(t, filepath.Join(root, "test", "tools", "jaeger", "go.mod"), "github.com/jaegertracing/jaeger")
		var minor int
		if _, err := fmt.Sscanf(jaegerModule, "v1.%d.0", &minor); err != nil {
			t.Fatalf("test/tools/jaeger pins jaeger %s: %v", jaegerModule, err)
		}
		if want := "jaegertracing/jaeger:2." + strconv.Itoa(minor-63) + ".0"; c.Services["jaeger"].Image != want {
			t.Errorf("jaeger image %s, want %s (the release of module %s)", c.Services["jaeger"].Image, want, jaegerModule)
		}
		contrib := composeModuleVersion(t, filepath.Join(root, "test", "tools", "otelcol", "go.mod"),
			"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter")
		if want := "otel/opentelemetry-collector-contrib:" + strings.TrimPrefix(contrib, "v"); c.Services["collector"].Image != want {
			t.Errorf("collector image %s, want %s (test/tools/otelcol's components)", c.Services["collector"].Image, want)
		}
	})
}

// composeScriptDefaults reads the `: "${NAME:=value}"` defaults of a shell script.
func composeScriptDefaults(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`\$\{(\w+):=([^}]*)\}`).FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// composeModuleVersion is the version a go.mod requires of module.
func composeModuleVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	raw, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("%s does not require %s", gomod, module)
	}
	return m[1]
}

// TestExampleCaddyfiles runs `tokentap validate` on every Caddyfile of
// examples/: each must adapt and provision with the modules of the built
// binary, including those that only run elsewhere (Honeycomb, Docker).
func TestExampleCaddyfiles(t *testing.T) {
	bin := testbin.Binary(t)
	root := testbin.RepoRoot(t)
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (d.Name() == "Caddyfile" || strings.HasSuffix(d.Name(), ".Caddyfile")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The examples that must have one: a Caddyfile moved or renamed
	// without this list is a broken link in a README or a script.
	for _, want := range []string{"jaeger/Caddyfile", "honeycomb/Caddyfile", "langfuse/Caddyfile", "datadog/Caddyfile",
		"pricing/Caddyfile", "collector/tokentap.Caddyfile", "collector/lb.Caddyfile", "compose/tokentap.Caddyfile",
		"compose/lb.Caddyfile", "compose/simulator.Caddyfile"} {
		if !slices.Contains(files, filepath.Join(root, "examples", want)) {
			t.Errorf("examples/%s is missing", want)
		}
	}
	home := t.TempDir()
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			cmd := exec.Command(bin, "validate", "--config", f, "--adapter", "caddyfile")
			// From the repository root, where the READMEs run them: a
			// path in a Caddyfile (the pricing example's pricing_file)
			// is relative to it.
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("tokentap validate %s: %v\n%s", rel, err, out)
			}
		})
	}
}
