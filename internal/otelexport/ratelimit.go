package otelexport

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/tokentap/tokentap/internal/ratelimit"
	"github.com/tokentap/tokentap/internal/sink"
)

// The rate limit gauges (Prometheus: tokentap_ratelimit_remaining_share_ratio,
// tokentap_ratelimit_reset_seconds), by tokentap.ratelimit.kind: the
// latest remaining share of each limit the provider reports, and how long
// until it is whole again, per provider, upstream, model and labels, so
// that an alert can fire before the 429s do.
const (
	metricRateLimitShare = "tokentap.ratelimit.remaining_share"
	metricRateLimitReset = "tokentap.ratelimit.reset"
	attrRateLimitKind    = attribute.Key("tokentap.ratelimit.kind")
	attrRetryAfter       = attribute.Key("tokentap.ratelimit.retry_after")
)

// rateLimitKeys are the span attributes of each kind:
// tokentap.ratelimit.<kind>.limit, .remaining, .reset (s) and
// .remaining_share.
var rateLimitKeys = func() (k [ratelimit.NumKinds]struct{ limit, remaining, reset, share attribute.Key }) {
	for i := range k {
		p := "tokentap.ratelimit." + ratelimit.Kind(i).String()
		k[i].limit = attribute.Key(p + ".limit")
		k[i].remaining = attribute.Key(p + ".remaining")
		k[i].reset = attribute.Key(p + ".reset")
		k[i].share = attribute.Key(p + ".remaining_share")
	}
	return k
}()

// rateLimitKinds are the tokentap.ratelimit.kind attributes, built once.
var rateLimitKinds = func() (k [ratelimit.NumKinds]attribute.KeyValue) {
	for i := range k {
		k[i] = attrRateLimitKind.String(ratelimit.Kind(i).String())
	}
	return k
}()

// appendRateLimit appends what the response's headers said of the rate
// limits: each value the provider reported, nothing it did not.
func appendRateLimit(attrs []attribute.KeyValue, rl *ratelimit.Headers) []attribute.KeyValue {
	for i := range rl.Limits {
		l, keys := &rl.Limits[i], &rateLimitKeys[i]
		if l.HasLimit {
			attrs = append(attrs, keys.limit.Int64(l.Limit))
		}
		if l.HasRemaining {
			attrs = append(attrs, keys.remaining.Int64(l.Remaining))
		}
		if l.HasReset {
			attrs = append(attrs, keys.reset.Float64(l.Reset.Seconds()))
		}
		if s, ok := l.Share(); ok {
			attrs = append(attrs, keys.share.Float64(s))
		}
	}
	if rl.HasRetryAfter {
		attrs = append(attrs, attrRetryAfter.Float64(rl.RetryAfter.Seconds()))
	}
	return attrs
}

// maxRateLimitSeries bounds the gauges' series (one per provider,
// upstream, model and label values). Past it a new combination is not
// reported: a gauge's latest value cannot be folded into an overflow
// series the way a count can.
const maxRateLimitSeries = 500

// rateLimitSeries is one series' latest report: per kind, the remaining
// share and the moment the limit resets, as float64 bits and Unix
// nanoseconds, NaN and 0 when unknown. Requests write it with atomics and
// the collection reads it the same way.
type rateLimitSeries struct {
	provider, host, model string
	labels                []sink.Label
	// attrs are the series' attributes, built once.
	attrs []attribute.KeyValue
	share [ratelimit.NumKinds]atomic.Uint64
	reset [ratelimit.NumKinds]atomic.Int64
	next  *rateLimitSeries // another series with the same hash
}

// rateLimitTable finds a series by a hash of its identity. Lookups load
// the map from an atomic pointer and take no lock; adding a series, once
// per combination and at most max times, copies the map under mu.
type rateLimitTable struct {
	seed maphash.Seed
	max  int
	mu   sync.Mutex
	m    atomic.Pointer[map[uint64]*rateLimitSeries]
	n    int
}

func newRateLimitTable(max int) *rateLimitTable {
	return &rateLimitTable{seed: maphash.MakeSeed(), max: max}
}

// rateLimits is the gauges' table: process wide, like the caps, and kept
// across reloads.
var rateLimits = newRateLimitTable(maxRateLimitSeries)

// hash hashes a series' identity without allocating.
func (t *rateLimitTable) hash(provider, host, model string, labels []sink.Label) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	for _, s := range [3]string{provider, host, model} {
		_, _ = h.WriteString(s)
		_ = h.WriteByte(0)
	}
	for _, l := range labels {
		_, _ = h.WriteString(l.Name)
		_ = h.WriteByte(0)
		_, _ = h.WriteString(l.Value)
		_ = h.WriteByte(0)
	}
	return h.Sum64()
}

func (s *rateLimitSeries) is(provider, host, model string, labels []sink.Label) bool {
	return s.provider == provider && s.host == host && s.model == model && slices.Equal(s.labels, labels)
}

// series returns the series of an identity, adding it if the table has
// room; nil past the cap.
func (t *rateLimitTable) series(provider, host, model string, labels []sink.Label) *rateLimitSeries {
	h := t.hash(provider, host, model, labels)
	if m := t.m.Load(); m != nil {
		for s := (*m)[h]; s != nil; s = s.next {
			if s.is(provider, host, model, labels) {
				return s
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m.Load()
	if old != nil {
		for s := (*old)[h]; s != nil; s = s.next {
			if s.is(provider, host, model, labels) {
				return s
			}
		}
	}
	if t.n >= t.max {
		return nil
	}
	s := &rateLimitSeries{provider: provider, host: host, model: model, labels: slices.Clone(labels)}
	s.attrs = healthAttrs(provider, model, s.labels)
	if host != "" {
		s.attrs = append(s.attrs, semconv.ServerAddressKey.String(host))
	}
	for k := range s.share {
		s.share[k].Store(math.Float64bits(math.NaN()))
	}
	next := make(map[uint64]*rateLimitSeries, 1+t.n)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	s.next = next[h]
	next[h] = s
	t.n++
	t.m.Store(&next)
	return s
}

// recordRateLimit keeps the latest report of r's series for the gauges.
// In the common case, a series seen before, it takes no lock and
// allocates nothing.
func recordRateLimit(r *sink.Result) {
	rl := &r.RateLimit
	known := false
	for i := range rl.Limits {
		known = known || rl.Limits[i].HasRemaining || rl.Limits[i].HasReset
	}
	if !known {
		return
	}
	host := r.Host
	if host != "" {
		host = serverAddrs.Admit(validUTF8(host))
	}
	model := responseModels.Admit(validUTF8(r.Model()))
	s := rateLimits.series(validUTF8(r.Provider), host, model, r.Labels)
	if s == nil {
		return
	}
	at := rl.At
	if at.IsZero() {
		at = r.End
	}
	for i := range rl.Limits {
		l := &rl.Limits[i]
		if !l.HasRemaining && !l.HasReset {
			continue
		}
		share := math.NaN()
		if v, ok := l.Share(); ok {
			share = v
		}
		s.share[i].Store(math.Float64bits(share))
		var resetAt int64
		if l.HasReset {
			resetAt = at.Add(l.Reset).UnixNano()
		}
		s.reset[i].Store(resetAt)
	}
}

// newRateLimitInstruments creates the two gauges, whose callbacks read
// the series table.
func newRateLimitInstruments(m metric.Meter) error {
	_, err := m.Float64ObservableGauge(metricRateLimitShare,
		metric.WithUnit("1"),
		metric.WithDescription("The remaining share (remaining over limit, 0 to 1) of a provider's rate limit, by tokentap.ratelimit.kind, as its latest response's headers reported it."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			rateLimits.each(func(s *rateLimitSeries, k int) {
				if v := math.Float64frombits(s.share[k].Load()); !math.IsNaN(v) {
					o.Observe(v, metric.WithAttributes(append(slices.Clip(s.attrs), rateLimitKinds[k])...))
				}
			})
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = m.Float64ObservableGauge(metricRateLimitReset,
		metric.WithUnit("s"),
		metric.WithDescription("Time until a provider's rate limit is whole again, by tokentap.ratelimit.kind, from its latest response's headers; 0 once that moment has passed."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			now := time.Now().UnixNano()
			rateLimits.each(func(s *rateLimitSeries, k int) {
				if at := s.reset[k].Load(); at != 0 {
					o.Observe(max(float64(at-now), 0)/1e9, metric.WithAttributes(append(slices.Clip(s.attrs), rateLimitKinds[k])...))
				}
			})
			return nil
		}))
	return err
}

// each calls f for each series and kind.
func (t *rateLimitTable) each(f func(s *rateLimitSeries, k int)) {
	m := t.m.Load()
	if m == nil {
		return
	}
	for _, first := range *m {
		for s := first; s != nil; s = s.next {
			for k := range s.share {
				f(s, k)
			}
		}
	}
}
