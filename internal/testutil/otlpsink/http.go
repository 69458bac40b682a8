package otlpsink

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxHTTPBody bounds one OTLP/HTTP request, so a runaway test exporter
// fails loudly instead of filling memory.
const maxHTTPBody = 64 << 20

// StartHTTP listens on addr and serves OTLP over HTTP with protobuf bodies
// (the http/protobuf protocol) until Close: POST /v1/traces and
// /v1/metrics, gzip-compressed or not. The Sink it returns is read like a
// gRPC one.
func StartHTTP(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlpsink: listening on %s: %w", addr, err)
	}
	s := &Sink{
		addr:    ln.Addr().String(),
		served:  make(chan struct{}),
		arrived: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		req := new(collectortrace.ExportTraceServiceRequest)
		if !readProto(w, r, req) {
			return
		}
		s.addSpans(req)
		writeProto(w, &collectortrace.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		req := new(collectormetrics.ExportMetricsServiceRequest)
		if !readProto(w, r, req) {
			return
		}
		s.addMetrics(req)
		writeProto(w, &collectormetrics.ExportMetricsServiceResponse{})
	})
	s.httpServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		// As with gRPC, an error other than the one Shutdown causes
		// leaves the sink deaf, which waits report as a timeout.
		_ = s.httpServer.Serve(ln)
	}()
	return s, nil
}

// readProto decodes an OTLP/HTTP request body into m, answering the
// request itself with 400 or 415 when it cannot.
func readProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		// OTLP/HTTP JSON exists, but tokentap exports protobuf only.
		http.Error(w, "otlpsink: only application/x-protobuf is supported, got "+ct, http.StatusUnsupportedMediaType)
		return false
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxHTTPBody)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "otlpsink: "+err.Error(), http.StatusBadRequest)
			return false
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxHTTPBody)
	}
	b, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		http.Error(w, "otlpsink: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		http.Error(w, "otlpsink: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// closeHTTP stops an HTTP sink like Close stops a gRPC one: in-flight
// exports may finish for a few seconds, then connections are cut.
func (s *Sink) closeHTTP() {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := s.httpServer.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
		_ = s.httpServer.Close()
	}
}
