//go:build linux

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

const (
	honeycombHost = "api.honeycomb.io"
	// honeycombKey stands for the reader's HONEYCOMB_API_KEY.
	honeycombKey = "e2e-honeycomb-key"
)

// TestHoneycombReadme runs the commands of examples/honeycomb/README.md as
// written, in a network namespace where api.honeycomb.io resolves to a
// local OTLP gRPC receiver on port 443 with a certificate for that name.
// That checks the documented environment end to end, as far as it can be
// without Honeycomb: the endpoint's scheme and port, TLS, the gRPC
// protocol for both of the process's exporters (tokentap's and Caddy's
// tracing handler's), the x-honeycomb-team header, and the service name
// the dataset is named after.
func TestHoneycombReadme(t *testing.T) {
	rec := &honeycombReceiver{}
	runReadmeAgainst(t, "honeycomb", honeycombHost, func(ln net.Listener, cert tls.Certificate) {
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
		collectortrace.RegisterTraceServiceServer(srv, rec)
		go func() { _ = srv.Serve(ln) }()
		// Registered after the run's cleanup, so it runs first: tokentap's
		// last export at shutdown finds no receiver, which costs nothing
		// here.
		t.Cleanup(srv.Stop)
	}, "HONEYCOMB_API_KEY="+honeycombKey)

	// Caddy's span and tokentap's, of the one request, both in the
	// tokentap service, both sent with the key.
	want := map[string]int{"handler": otlpKindServer, "chat sim-fast": otlpKindClient}
	deadline := time.Now().Add(jaegerTraceTimeout)
	for {
		got := rec.received()
		byName := map[string]honeycombSpan{}
		for _, s := range got {
			byName[s.name] = s
		}
		complete := true
		for name := range want {
			if _, ok := byName[name]; !ok {
				complete = false
			}
		}
		if complete {
			for name, kind := range want {
				s := byName[name]
				if s.kind != kind || s.service != "tokentap" || s.team != honeycombKey {
					t.Errorf("span %q: kind %d, service.name %q, x-honeycomb-team %q; want kind %d, tokentap, %q",
						name, s.kind, s.service, s.team, kind, honeycombKey)
				}
			}
			if c := byName["chat sim-fast"].conversation; c != "demo-session-1" {
				t.Errorf("tokentap's span has gen_ai.conversation.id %q, want the X-Session-Id the README sends, demo-session-1", c)
			}
			if byName["chat sim-fast"].parent != byName["handler"].id {
				t.Errorf("tokentap's span has parent %s, want Caddy's span %s", byName["chat sim-fast"].parent, byName["handler"].id)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v the stand-in for %s received %v, want the spans %v", jaegerTraceTimeout, honeycombHost, got, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// honeycombSpan is what the stand-in keeps of each span it receives.
type honeycombSpan struct {
	name, service, team, id, parent string
	conversation                    string // gen_ai.conversation.id
	kind                            int
}

// honeycombReceiver is an OTLP gRPC trace receiver that notes, for every
// span, the x-honeycomb-team header of the export that carried it.
type honeycombReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []honeycombSpan
}

func (r *honeycombReceiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	team := ""
	if v := md.Get("x-honeycomb-team"); len(v) == 1 {
		team = v[0]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				conversation := ""
				for _, kv := range sp.GetAttributes() {
					if kv.GetKey() == "gen_ai.conversation.id" {
						conversation = kv.GetValue().GetStringValue()
					}
				}
				r.spans = append(r.spans, honeycombSpan{
					name: sp.GetName(), service: service, team: team, kind: int(sp.GetKind()),
					id: hex.EncodeToString(sp.GetSpanId()), parent: hex.EncodeToString(sp.GetParentSpanId()),
					conversation: conversation,
				})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *honeycombReceiver) received() []honeycombSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]honeycombSpan(nil), r.spans...)
}

// standInCertificates makes a CA, writes it to caFile, and returns a
// server certificate it signed for host: a backend's stand-in's.
func standInCertificates(t *testing.T, caFile, host string) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tokentap e2e test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// runReadmeAgainst runs the commands of examples/<example>/README.md as
// written, with env (the reader's keys), in a network namespace where host
// resolves to 127.0.0.1 and port 443 there is served by serve, with a
// certificate for host. Go reads its trusted roots from SSL_CERT_FILE: the
// stand-in's CA only, so that nothing but it can be trusted there.
func runReadmeAgainst(t *testing.T, example, host string, serve func(ln net.Listener, cert tls.Certificate), env ...string) {
	t.Helper()
	testbin.Binary(t) // built, so that `go run` reuses Go's build cache
	path := filepath.Join(testbin.RepoRoot(t), "examples", example, "README.md")
	blocks, _ := docReadSection(t, path, "")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	cert := standInCertificates(t, caFile, host)
	d := newDocRun(t, path, map[string]string{host: "127.0.0.1"}, append(env, "SSL_CERT_FILE="+caFile)...)
	ln, err := d.listen("127.0.0.1:443")
	if err != nil {
		t.Fatalf("listening on 127.0.0.1:443 in the namespace: %v", err)
	}
	serve(ln, cert)
	d.run(blocks)
}
