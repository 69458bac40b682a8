// Package otlpsink is an in-process OTLP trace and metrics receiver for
// tests.
//
// tokentap's contract with its users is the spans and metrics it exports,
// so tests must check what actually goes over the wire, as a collector
// would receive it, not what an in-memory SDK exporter saw before
// serialisation. A Sink is a real server implementing the OTLP
// TraceService and MetricsService on a loopback port, over gRPC (Start) or
// HTTP/protobuf (StartHTTP): point OTEL_EXPORTER_OTLP_ENDPOINT at
// Sink.Endpoint (with OTEL_EXPORTER_OTLP_INSECURE=true) in a subprocess, or
// an OTLP exporter at it in-process, and read back flattened, comparable
// Spans and Metrics.
package otlpsink

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	// Exporters configured with OTEL_EXPORTER_OTLP_COMPRESSION=gzip send
	// gzip-compressed messages; the server can only decode them when the
	// codec is registered.
	_ "google.golang.org/grpc/encoding/gzip"
)

// Span is one received span, flattened from the OTLP protobuf so that tests
// can compare fields without protobuf helpers.
//
// Attribute values (in Attributes and Resource) are Go values chosen for easy
// comparison: string, int64, float64, bool, []any for arrays, map[string]any
// for key-value lists, []byte for bytes, and nil for an empty value. Integers
// are always int64, whatever width the sender used, because OTLP has a single
// integer type.
type Span struct {
	Name string
	// Kind is the span kind in lower case without the OTLP prefix:
	// "unspecified", "internal", "server", "client", "producer" or
	// "consumer".
	Kind string
	// TraceID, SpanID and ParentSpanID are lower-case hex, as in W3C
	// traceparent headers and collector UIs; ParentSpanID is "" for a root
	// span.
	TraceID, SpanID, ParentSpanID string
	Attributes                    map[string]any
	// Resource holds the attributes of the resource the span came with,
	// such as service.name.
	Resource map[string]any
	// Scope is the instrumentation scope (tracer) name.
	Scope string
	// StatusCode is "unset", "ok" or "error".
	StatusCode string
	// StatusMessage is the status description, set only with "error".
	StatusMessage              string
	StartUnixNano, EndUnixNano uint64
}

// Duration is the span's end time minus its start time.
func (s Span) Duration() time.Duration {
	return time.Duration(s.EndUnixNano - s.StartUnixNano)
}

// String summarises the span for failure messages: name, kind and
// service.name, which is usually enough to tell which span a test got.
func (s Span) String() string {
	return fmt.Sprintf("%q (%s, service.name=%v)", s.Name, s.Kind, s.Resource["service.name"])
}

// ErrClosed is returned by WaitFor once the sink is closed, because no span
// can arrive after that and waiting on would only hang until the deadline.
var ErrClosed = errors.New("otlpsink: closed")

// Sink is a running OTLP receiver of traces and metrics. All its methods
// are safe for concurrent use.
type Sink struct {
	collectortrace.UnimplementedTraceServiceServer

	addr string
	// server is set for a gRPC sink, httpServer for an HTTP one.
	server     *grpc.Server
	httpServer *http.Server
	served     chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	spans   []Span
	metrics []Metric
	arrived chan struct{} // closed and replaced whenever spans or metrics are added
	closed  bool

	closeOnce sync.Once
}

// Start listens on addr (use "127.0.0.1:0" for a free loopback port) and
// serves the OTLP TraceService and MetricsService over gRPC there until
// Close.
func Start(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlpsink: listening on %s: %w", addr, err)
	}
	s := &Sink{
		addr:    ln.Addr().String(),
		server:  grpc.NewServer(),
		served:  make(chan struct{}),
		arrived: make(chan struct{}),
	}
	collectortrace.RegisterTraceServiceServer(s.server, s)
	collectormetrics.RegisterMetricsServiceServer(s.server, metricsServer{s: s})
	go func() {
		defer close(s.served)
		// Serve returns nil after Stop or GracefulStop; any other error
		// leaves the sink deaf, which WaitFor reports as a timeout with
		// what was received so far.
		_ = s.server.Serve(ln)
	}()
	return s, nil
}

// Addr is the host:port the sink listens on.
func (s *Sink) Addr() string { return s.addr }

// Endpoint is the sink's URL for OTEL_EXPORTER_OTLP_ENDPOINT. The scheme is
// http because the sink does not speak TLS; gRPC exporters also need
// OTEL_EXPORTER_OTLP_INSECURE=true (or otlptracegrpc.WithInsecure). OTLP/HTTP
// exporters append /v1/traces or /v1/metrics to it, as the sink expects.
func (s *Sink) Endpoint() string { return "http://" + s.addr }

// Export implements the OTLP TraceService: it records every span of the
// request. It is called by gRPC, not by tests.
func (s *Sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.addSpans(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (s *Sink) addSpans(req *collectortrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, convertSpan(sp, rs.GetResource().GetAttributes(), ss.GetScope().GetName()))
			}
		}
	}
	if len(got) > 0 {
		s.mu.Lock()
		s.spans = append(s.spans, got...)
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.mu.Unlock()
	}
}

// Spans returns a snapshot of every span received so far, in arrival order.
// The result is the caller's own: modifying it does not affect the sink.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Span, len(s.spans))
	for i, sp := range s.spans {
		out[i] = sp.clone()
	}
	return out
}

// WaitFor returns the first span received, already or later, for which pred
// is true. It gives up when ctx is done or the sink is closed; the error then
// lists the spans that did arrive, so that a failing test says whether the
// span was missing or merely different from what it expected.
//
// pred is called without the sink's lock held, on copies of the spans, so
// it may do anything, including calling the sink.
func (s *Sink) WaitFor(ctx context.Context, pred func(Span) bool) (Span, error) {
	next := 0 // spans before next have already been tried
	for {
		s.mu.Lock()
		fresh := make([]Span, len(s.spans)-next)
		for i, sp := range s.spans[next:] {
			fresh[i] = sp.clone()
		}
		next = len(s.spans)
		arrived, closed := s.arrived, s.closed
		s.mu.Unlock()

		for _, sp := range fresh {
			if pred(sp) {
				return sp, nil
			}
		}
		if closed {
			return Span{}, s.notFound(ErrClosed)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return Span{}, s.notFound(ctx.Err())
		}
	}
}

// notFound builds WaitFor's error, naming what was received instead.
func (s *Sink) notFound(cause error) error {
	spans := s.Spans()
	if len(spans) == 0 {
		return fmt.Errorf("otlpsink: no matching span; none received at %s: %w", s.Endpoint(), cause)
	}
	names := make([]string, len(spans))
	for i, sp := range spans {
		names[i] = sp.String()
	}
	return fmt.Errorf("otlpsink: no matching span among the %d received: %s: %w",
		len(spans), strings.Join(names, ", "), cause)
}

// closeGrace bounds Close's graceful stop: an exporter stuck mid-request
// must not hang a test's cleanup.
const closeGrace = 5 * time.Second

// Close stops the server, letting in-flight exports finish (for at most a
// few seconds), and returns only when every goroutine the sink started has
// exited, so that leak checks after it pass. It wakes any WaitFor. Calling it
// again does nothing.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		if s.httpServer != nil {
			s.closeHTTP()
		} else {
			stopped := make(chan struct{})
			go func() {
				s.server.GracefulStop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(closeGrace):
				s.server.Stop() // also makes GracefulStop return
				<-stopped
			}
		}
		<-s.served

		s.mu.Lock()
		s.closed = true
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.mu.Unlock()
	})
}

func convertSpan(sp *tracepb.Span, resource []*commonpb.KeyValue, scope string) Span {
	return Span{
		Name:          sp.GetName(),
		Kind:          enumName(sp.GetKind().String(), "SPAN_KIND_"),
		TraceID:       hex.EncodeToString(sp.GetTraceId()),
		SpanID:        hex.EncodeToString(sp.GetSpanId()),
		ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
		Attributes:    convertAttributes(sp.GetAttributes()),
		Resource:      convertAttributes(resource),
		Scope:         scope,
		StatusCode:    enumName(sp.GetStatus().GetCode().String(), "STATUS_CODE_"),
		StatusMessage: sp.GetStatus().GetMessage(),
		StartUnixNano: sp.GetStartTimeUnixNano(),
		EndUnixNano:   sp.GetEndTimeUnixNano(),
	}
}

// enumName turns an OTLP enum name such as SPAN_KIND_CLIENT into "client",
// the spelling of the OpenTelemetry API and of collector UIs.
func enumName(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

func convertAttributes(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = convertValue(kv.GetValue())
	}
	return m
}

func convertValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]any, len(vals))
		for i, e := range vals {
			out[i] = convertValue(e)
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return convertAttributes(x.KvlistValue.GetValues())
	default:
		// An empty AnyValue is OTLP's null; string_value_strindex only
		// occurs in profiles, never in traces.
		return nil
	}
}

// clone deep-copies the span's maps so that snapshots handed to callers share
// nothing mutable with the sink.
func (s Span) clone() Span {
	s.Attributes = cloneValue(s.Attributes).(map[string]any)
	s.Resource = cloneValue(s.Resource).(map[string]any)
	return s
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []byte:
		return append([]byte(nil), x...)
	default:
		return v
	}
}
