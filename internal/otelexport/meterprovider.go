package otelexport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
)

// sharedMeterProvider is the process-wide MeterProvider: cumulative
// metrics must continue across reloads instead of starting over or being
// exported twice (shared.go).
var sharedMeterProvider = shared[*MeterPipeline]{what: "metric exporter"}

// MeterPipeline is what hangs off the shared MeterProvider, the
// OpenTelemetry SDK's meter provider (not package meter, which measures
// the exchanges).
type MeterPipeline struct {
	// Instruments are created once per provider: instrument creation
	// takes the SDK's locks and is not meant for the request path.
	Instruments *Instruments
	// collector is the Prometheus exporter's view of the provider, shown
	// on Caddy's admin /metrics; nil when the SDK is disabled.
	collector prometheus.Collector
	shutdown  func(context.Context) error

	// registries holds the collector's registration in each Caddy
	// config's Prometheus registry: a config may hold several tokentap
	// handlers, and a registry must get the collector only once.
	regMu      sync.Mutex
	registries map[*prometheus.Registry]*registration
}

// MetricReadersOverride, when set, replaces the readers that
// OTEL_METRICS_EXPORTER would build (nil: none) while the Prometheus reader
// stays. Tests set it so that the handlers they provision push metrics to
// no OTLP endpoint, or to a reader of their own; a func, because a reader
// belongs to one provider and the provider is rebuilt after the last
// release. Its readers are cumulative and take opts, which hand them the
// histograms tokentap aggregates itself (chunkgaps.go).
var MetricReadersOverride func(opts ...sdkmetric.ReaderOption) []sdkmetric.Reader

// AcquireMeterProvider returns the pipeline of the shared MeterProvider,
// building it on first use, and a release function to call once the
// caller is done with it.
func AcquireMeterProvider(ctx context.Context, logger *zap.Logger) (*MeterPipeline, func(), error) {
	return sharedMeterProvider.acquire(logger, func() (*MeterPipeline, func(context.Context) error, error) {
		p, err := newMeterPipeline(ctx, logger)
		if err != nil {
			return nil, nil, err
		}
		return p, p.shutdown, nil
	})
}

// newMeterPipeline builds the MeterProvider from the standard OTEL_*
// environment variables, with the same resource as the traces. It always
// has a Prometheus reader for Caddy's admin /metrics, plus the push
// exporters OTEL_METRICS_EXPORTER names (OTLP over gRPC by default).
func newMeterPipeline(ctx context.Context, logger *zap.Logger) (*MeterPipeline, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		ins, err := newMetricInstruments(noop.NewMeterProvider(), false, nil)
		if err != nil {
			return nil, err
		}
		return &MeterPipeline{Instruments: ins}, nil
	}

	// With explicit buckets, tokentap aggregates the chunk gaps itself
	// and every reader takes them from a producer (chunkgaps.go).
	views := histogramViews(logger)
	var gaps *gapHistogram
	if views == nil {
		gaps = newGapHistogram()
	}
	producerFor := func(t metricdata.Temporality) []sdkmetric.ReaderOption {
		if gaps == nil {
			return nil
		}
		return []sdkmetric.ReaderOption{sdkmetric.WithProducer(gaps.producer(t))}
	}

	var readers []sdkmetric.Reader
	if MetricReadersOverride != nil {
		readers = MetricReadersOverride(producerFor(metricdata.CumulativeTemporality)...)
	} else {
		for _, name := range metricExporterNames() {
			r, err := newMetricReader(ctx, name, logger, producerFor)
			if err != nil {
				for _, built := range readers {
					_ = built.Shutdown(ctx)
				}
				return nil, err
			}
			if r != nil {
				readers = append(readers, r)
			}
		}
	}

	var reg collectorCapture
	promOpts := []otelprom.Option{
		otelprom.WithRegisterer(&reg),
		// The translation is pinned so that /metrics names do not change
		// with the exporter's defaults: gen_ai_client_operation_duration_seconds.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// Caddy's registry is pedantic: a second target_info from another
		// OpenTelemetry exporter in the same registry would fail the whole
		// scrape. The scrape target already identifies the instance.
		otelprom.WithoutTargetInfo(),
	}
	if gaps != nil {
		promOpts = append(promOpts, otelprom.WithProducer(gaps.producer(metricdata.CumulativeTemporality)))
	}
	prom, err := otelprom.New(promOpts...)
	if err != nil {
		for _, r := range readers {
			_ = r.Shutdown(ctx)
		}
		return nil, fmt.Errorf("setting up the Prometheus exporter: %v", err)
	}

	res, err := newResource(ctx)
	if err != nil {
		// A resource detector failing costs attributes, not metrics.
		logger.Warn("building the OpenTelemetry resource", zap.Error(err))
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom),
		sdkmetric.WithView(views...)}
	for _, r := range readers {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	ins, err := newMetricInstruments(mp, true, gaps)
	if err != nil {
		_ = mp.Shutdown(ctx)
		return nil, err
	}
	return &MeterPipeline{
		Instruments: ins,
		collector:   reg.c,
		registries:  map[*prometheus.Registry]*registration{},
		shutdown: func(ctx context.Context) error {
			// Shutdown flushes the push readers first.
			return mp.Shutdown(ctx)
		},
	}, nil
}

// collectorCapture is the Registerer handed to the Prometheus exporter: it
// keeps the exporter's collector so that each Caddy config's registry can
// take it, instead of the process-wide default registry, which Caddy's
// /metrics does not serve.
type collectorCapture struct{ c prometheus.Collector }

func (r *collectorCapture) Register(c prometheus.Collector) error {
	if r.c != nil {
		return errors.New("collectorCapture holds one collector")
	}
	r.c = c
	return nil
}

func (r *collectorCapture) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *collectorCapture) Unregister(c prometheus.Collector) bool {
	if r.c != c {
		return false
	}
	r.c = nil
	return true
}

// Register shows the metrics on a Caddy config's registry, which Caddy's
// admin /metrics (and the metrics handler) serve. Every config load has a
// new registry, so reloads never put the collector twice in one; the
// returned function takes it out again when the handler goes.
//
// The exporter's collector describes no metrics in advance (an "unchecked"
// collector), and such a collector can be neither detected as registered
// twice nor unregistered: registering it twice would fail every scrape
// with duplicate series, and the registry would keep it after the config.
// So each registry gets a gate of its own, registered once, which stops
// collecting when the registry's last tokentap handler goes; the map
// entry goes with it, so old registries are not kept alive.
func (p *MeterPipeline) Register(reg *prometheus.Registry, logger *zap.Logger) func() {
	if p.collector == nil || reg == nil {
		return func() {}
	}
	p.regMu.Lock()
	defer p.regMu.Unlock()
	r := p.registries[reg]
	if r == nil {
		g := &collectorGate{c: p.collector}
		if err := reg.Register(g); err != nil {
			// A fault costs the Prometheus view, not the config.
			logger.Warn("tokentap's metrics will not be on Caddy's /metrics", zap.Error(err))
			return func() {}
		}
		g.on.Store(true)
		r = &registration{gate: g}
		p.registries[reg] = r
	}
	r.handlers++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.regMu.Lock()
			defer p.regMu.Unlock()
			if r.handlers--; r.handlers == 0 {
				r.gate.on.Store(false)
				delete(p.registries, reg)
			}
		})
	}
}

// registration is the collector's presence in one Caddy registry.
type registration struct {
	gate     *collectorGate
	handlers int
}

// collectorGate passes the exporter's metrics to one registry while that
// registry's config has tokentap handlers.
type collectorGate struct {
	c  prometheus.Collector
	on atomic.Bool
}

// Describe describes nothing, as the collector it gates: the metrics are
// known only when collected.
func (g *collectorGate) Describe(chan<- *prometheus.Desc) {}

// Collect collects the gated metrics while the gate is open.
func (g *collectorGate) Collect(ch chan<- prometheus.Metric) {
	if g.on.Load() {
		g.c.Collect(ch)
	}
}

// metricExporterNames reads OTEL_METRICS_EXPORTER: a comma-separated list
// of otlp, console, prometheus and none, defaulting to otlp.
func metricExporterNames() []string { return exporterList("OTEL_METRICS_EXPORTER") }

// newMetricReader builds the push reader of one exporter name; nil for
// the names that push nothing.
//
// producerFor gives the reader's options for its exporter's temporality of
// histograms.
func newMetricReader(ctx context.Context, name string, logger *zap.Logger, producerFor func(metricdata.Temporality) []sdkmetric.ReaderOption) (sdkmetric.Reader, error) {
	var exp sdkmetric.Exporter
	var err error
	switch name {
	case "none":
		return nil, nil
	case "prometheus":
		// The specification's prometheus exporter is a pull endpoint of
		// its own; tokentap's is Caddy's /metrics, which is always on.
		return nil, nil
	case "console":
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(os.Stderr),
			stdoutmetric.WithTemporalitySelector(temporalityFromEnv(logger)))
	case "otlp":
		// The OTLP exporters read the endpoint, headers, TLS, timeout,
		// compression, temporality preference and histogram aggregation
		// from the environment themselves.
		switch protocol := metricsProtocol(); protocol {
		case "grpc":
			exp, err = otlpmetricgrpc.New(ctx)
		case "http/protobuf":
			exp, err = otlpmetrichttp.New(ctx)
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL %q is not supported (use grpc or http/protobuf)", protocol)
		}
	default:
		return nil, fmt.Errorf("OTEL_METRICS_EXPORTER %q is not supported (use otlp, console, prometheus or none)", name)
	}
	if err != nil {
		return nil, err
	}
	// The periodic reader exports on its own goroutine, every
	// OTEL_METRIC_EXPORT_INTERVAL (60 s) within OTEL_METRIC_EXPORT_TIMEOUT
	// (30 s), both read by the SDK: recording never waits for an export.
	var opts []sdkmetric.PeriodicReaderOption
	for _, o := range producerFor(exp.Temporality(sdkmetric.InstrumentKindHistogram)) {
		opts = append(opts, o)
	}
	return sdkmetric.NewPeriodicReader(&loggedExporter{Exporter: exp, log: exportLog{logger: logger, every: time.Minute}}, opts...), nil
}

// metricsProtocol is the OTLP transport for metrics, gRPC by default as for
// traces.
func metricsProtocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return strings.ToLower(v)
		}
	}
	return "grpc"
}

// temporalityFromEnv reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
// for the console exporter, as the OTLP exporters do for themselves:
// cumulative (default), delta or lowmemory.
func temporalityFromEnv(logger *zap.Logger) sdkmetric.TemporalitySelector {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE")))
	switch v {
	case "", "cumulative":
		return sdkmetric.DefaultTemporalitySelector
	case "delta":
		return func(k sdkmetric.InstrumentKind) metricdata.Temporality {
			switch k {
			case sdkmetric.InstrumentKindUpDownCounter, sdkmetric.InstrumentKindObservableUpDownCounter:
				return metricdata.CumulativeTemporality
			}
			return metricdata.DeltaTemporality
		}
	case "lowmemory":
		return func(k sdkmetric.InstrumentKind) metricdata.Temporality {
			switch k {
			case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram:
				return metricdata.DeltaTemporality
			}
			return metricdata.CumulativeTemporality
		}
	}
	logger.Warn("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE is not cumulative, delta or lowmemory; using cumulative",
		zap.String("value", v))
	return sdkmetric.DefaultTemporalitySelector
}

// loggedExporter logs export failures itself, at most once per interval,
// instead of handing them to OpenTelemetry's global error handler, which
// would print every failure of every interval to stderr. A failed export
// is not retried: cumulative points are resent whole by the next export,
// delta points of that interval are lost.
type loggedExporter struct {
	sdkmetric.Exporter
	log exportLog
}

// Export sends the points and reports a failure to the log only.
func (e *loggedExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := e.Exporter.Export(ctx, rm); err != nil {
		e.log.failed(err)
	}
	return nil
}

// exportLog rate-limits the log of export failures: a collector that is
// down fails every interval, and one line a minute says so.
type exportLog struct {
	logger *zap.Logger
	every  time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *exportLog) failed(err error) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.logger.Warn("exporting metrics failed; requests are not affected",
		zap.Error(err),
		zap.Int("failures_not_logged", n),
		zap.Duration("logged_at_most_every", l.every))
}
