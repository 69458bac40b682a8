package otlpsink

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
)

// Metric is one metric as one export request carried it, flattened from
// the OTLP protobuf like Span. A periodic exporter sends the same metric
// again at every interval, so a sink holds one Metric per metric per
// export, in arrival order; the newest one of a cumulative metric has the
// totals.
type Metric struct {
	Name, Description, Unit string
	// Kind is "gauge", "sum", "histogram", "exponential_histogram" or
	// "summary".
	Kind string
	// Temporality is "cumulative" or "delta" for sums and histograms, ""
	// for the kinds that have none.
	Temporality string
	// Monotonic is set for monotonic sums (counters).
	Monotonic bool
	// Scope is the instrumentation scope (meter) name.
	Scope string
	// Resource holds the attributes of the resource the metric came with.
	Resource map[string]any
	Points   []Point
}

// Point is one data point of a Metric. Which fields are set depends on the
// metric's Kind: Value for gauges and sums; Count, Sum, Min, Max, Bounds
// and BucketCounts for histograms (Min and Max only when the sender set
// them); Count and Sum for exponential histograms and summaries.
type Point struct {
	// Attributes are converted like a Span's.
	Attributes                      map[string]any
	StartTimeUnixNano, TimeUnixNano uint64
	// Value is a gauge's or a sum's value; IsInt says the sender sent it
	// as an integer.
	Value float64
	IsInt bool
	Count uint64
	Sum   float64
	// HasSum is false when a histogram point left its sum out, which OTLP
	// allows (for example for values that may be negative).
	HasSum   bool
	Min, Max *float64
	// Bounds are a histogram's explicit bucket boundaries; BucketCounts
	// has one more element than Bounds.
	Bounds       []float64
	BucketCounts []uint64
	Exemplars    []Exemplar
	// NoRecordedValue is the flag a sender sets on the point of a stream
	// that ended (a staleness marker).
	NoRecordedValue bool
}

// Exemplar is a sample measurement that a data point carries, with the
// trace it was recorded in.
type Exemplar struct {
	Value float64
	// TraceID and SpanID are lower-case hex, "" when the measurement was
	// not recorded inside a span.
	TraceID, SpanID    string
	FilteredAttributes map[string]any
	TimeUnixNano       uint64
}

// String summarises the metric for failure messages.
func (m Metric) String() string {
	return fmt.Sprintf("%s (%s, %d points)", m.Name, m.Kind, len(m.Points))
}

// metricsServer implements the OTLP MetricsService for a Sink. It is a type
// of its own because the trace and metrics services both name their method
// Export.
type metricsServer struct {
	collectormetrics.UnimplementedMetricsServiceServer
	s *Sink
}

// Export records every metric of the request. It is called by gRPC.
func (ms metricsServer) Export(_ context.Context, req *collectormetrics.ExportMetricsServiceRequest) (*collectormetrics.ExportMetricsServiceResponse, error) {
	ms.s.addMetrics(req)
	return &collectormetrics.ExportMetricsServiceResponse{}, nil
}

func (s *Sink) addMetrics(req *collectormetrics.ExportMetricsServiceRequest) {
	var got []Metric
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				got = append(got, convertMetric(m, rm.GetResource().GetAttributes(), sm.GetScope().GetName()))
			}
		}
	}
	if len(got) == 0 {
		return
	}
	s.mu.Lock()
	s.metrics = append(s.metrics, got...)
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()
}

// Metrics returns a snapshot of every metric received so far, in arrival
// order. The result is the caller's own.
func (s *Sink) Metrics() []Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Metric, len(s.metrics))
	for i, m := range s.metrics {
		out[i] = m.clone()
	}
	return out
}

// WaitForMetric returns the first metric received, already or later, for
// which pred is true, like WaitFor does for spans.
func (s *Sink) WaitForMetric(ctx context.Context, pred func(Metric) bool) (Metric, error) {
	next := 0
	for {
		s.mu.Lock()
		fresh := make([]Metric, len(s.metrics)-next)
		for i, m := range s.metrics[next:] {
			fresh[i] = m.clone()
		}
		next = len(s.metrics)
		arrived, closed := s.arrived, s.closed
		s.mu.Unlock()

		for _, m := range fresh {
			if pred(m) {
				return m, nil
			}
		}
		if closed {
			return Metric{}, s.metricNotFound(ErrClosed)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return Metric{}, s.metricNotFound(ctx.Err())
		}
	}
}

func (s *Sink) metricNotFound(cause error) error {
	ms := s.Metrics()
	if len(ms) == 0 {
		return fmt.Errorf("otlpsink: no matching metric; none received at %s: %w", s.Endpoint(), cause)
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.String()
	}
	return fmt.Errorf("otlpsink: no matching metric among the %d received: %s: %w",
		len(ms), strings.Join(names, ", "), cause)
}

func convertMetric(m *metricspb.Metric, resource []*commonpb.KeyValue, scope string) Metric {
	out := Metric{
		Name:        m.GetName(),
		Description: m.GetDescription(),
		Unit:        m.GetUnit(),
		Scope:       scope,
		Resource:    convertAttributes(resource),
	}
	temporality := func(t metricspb.AggregationTemporality) string {
		return enumName(t.String(), "AGGREGATION_TEMPORALITY_")
	}
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Gauge:
		out.Kind = "gauge"
		for _, p := range d.Gauge.GetDataPoints() {
			out.Points = append(out.Points, convertNumberPoint(p))
		}
	case *metricspb.Metric_Sum:
		out.Kind = "sum"
		out.Temporality = temporality(d.Sum.GetAggregationTemporality())
		out.Monotonic = d.Sum.GetIsMonotonic()
		for _, p := range d.Sum.GetDataPoints() {
			out.Points = append(out.Points, convertNumberPoint(p))
		}
	case *metricspb.Metric_Histogram:
		out.Kind = "histogram"
		out.Temporality = temporality(d.Histogram.GetAggregationTemporality())
		for _, p := range d.Histogram.GetDataPoints() {
			pt := Point{
				Attributes:        convertAttributes(p.GetAttributes()),
				StartTimeUnixNano: p.GetStartTimeUnixNano(),
				TimeUnixNano:      p.GetTimeUnixNano(),
				Count:             p.GetCount(),
				Sum:               p.GetSum(),
				HasSum:            p.Sum != nil,
				Bounds:            append([]float64(nil), p.GetExplicitBounds()...),
				BucketCounts:      append([]uint64(nil), p.GetBucketCounts()...),
				Exemplars:         convertExemplars(p.GetExemplars()),
				NoRecordedValue:   p.GetFlags()&uint32(metricspb.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK) != 0,
			}
			if p.Min != nil {
				v := p.GetMin()
				pt.Min = &v
			}
			if p.Max != nil {
				v := p.GetMax()
				pt.Max = &v
			}
			out.Points = append(out.Points, pt)
		}
	case *metricspb.Metric_ExponentialHistogram:
		out.Kind = "exponential_histogram"
		out.Temporality = temporality(d.ExponentialHistogram.GetAggregationTemporality())
		for _, p := range d.ExponentialHistogram.GetDataPoints() {
			out.Points = append(out.Points, Point{
				Attributes:        convertAttributes(p.GetAttributes()),
				StartTimeUnixNano: p.GetStartTimeUnixNano(),
				TimeUnixNano:      p.GetTimeUnixNano(),
				Count:             p.GetCount(),
				Sum:               p.GetSum(),
				HasSum:            p.Sum != nil,
				Exemplars:         convertExemplars(p.GetExemplars()),
			})
		}
	case *metricspb.Metric_Summary:
		out.Kind = "summary"
		for _, p := range d.Summary.GetDataPoints() {
			out.Points = append(out.Points, Point{
				Attributes:        convertAttributes(p.GetAttributes()),
				StartTimeUnixNano: p.GetStartTimeUnixNano(),
				TimeUnixNano:      p.GetTimeUnixNano(),
				Count:             p.GetCount(),
				Sum:               p.GetSum(),
				HasSum:            true,
			})
		}
	}
	return out
}

func convertNumberPoint(p *metricspb.NumberDataPoint) Point {
	pt := Point{
		Attributes:        convertAttributes(p.GetAttributes()),
		StartTimeUnixNano: p.GetStartTimeUnixNano(),
		TimeUnixNano:      p.GetTimeUnixNano(),
		Exemplars:         convertExemplars(p.GetExemplars()),
	}
	switch v := p.GetValue().(type) {
	case *metricspb.NumberDataPoint_AsInt:
		pt.Value, pt.IsInt = float64(v.AsInt), true
	case *metricspb.NumberDataPoint_AsDouble:
		pt.Value = v.AsDouble
	}
	return pt
}

func convertExemplars(es []*metricspb.Exemplar) []Exemplar {
	if len(es) == 0 {
		return nil
	}
	out := make([]Exemplar, len(es))
	for i, e := range es {
		v := e.GetAsDouble()
		if x, ok := e.GetValue().(*metricspb.Exemplar_AsInt); ok {
			v = float64(x.AsInt)
		}
		out[i] = Exemplar{
			Value:              v,
			TraceID:            hex.EncodeToString(e.GetTraceId()),
			SpanID:             hex.EncodeToString(e.GetSpanId()),
			FilteredAttributes: convertAttributes(e.GetFilteredAttributes()),
			TimeUnixNano:       e.GetTimeUnixNano(),
		}
	}
	return out
}

// clone deep-copies what a caller could change through a snapshot.
func (m Metric) clone() Metric {
	m.Resource = cloneValue(m.Resource).(map[string]any)
	pts := make([]Point, len(m.Points))
	for i, p := range m.Points {
		p.Attributes = cloneValue(p.Attributes).(map[string]any)
		p.Bounds = append([]float64(nil), p.Bounds...)
		p.BucketCounts = append([]uint64(nil), p.BucketCounts...)
		if p.Min != nil {
			v := *p.Min
			p.Min = &v
		}
		if p.Max != nil {
			v := *p.Max
			p.Max = &v
		}
		if p.Exemplars != nil {
			es := make([]Exemplar, len(p.Exemplars))
			for j, e := range p.Exemplars {
				e.FilteredAttributes = cloneValue(e.FilteredAttributes).(map[string]any)
				es[j] = e
			}
			p.Exemplars = es
		}
		pts[i] = p
	}
	m.Points = pts
	return m
}
