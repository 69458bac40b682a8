package caddymodule

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/tokentap/tokentap/meter"
)

// Bucket boundaries. The semconv ones are the GenAI conventions' explicit
// boundaries (v1.41.0 gen-ai-metrics.md); the SDK's defaults would put most
// LLM latencies in two or three buckets.
var (
	// durationBuckets: 10 ms doubling to 81.92 s, for every semconv
	// duration histogram.
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// tokenBuckets: powers of 4 from 1 to 4^13, for gen_ai.client.token.usage.
	tokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	// timeToFirstTokenBuckets: finer than durationBuckets where models
	// differ, so that histogram_quantile can tell them apart: each bound
	// at most 1.5 times the one below from 50 ms to 3 s, at most twice
	// it above, up to two minutes for reasoning models and queues.
	timeToFirstTokenBuckets = []float64{0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}
	// tokensPerSecondBuckets: from CPU-bound local models (a few tokens/s)
	// to dedicated inference hardware (thousands), each bound at most 1.5
	// times the one below from 10 to 3000 tokens/s, so the slow tail (p5)
	// is as well resolved as the median.
	tokensPerSecondBuckets = []float64{1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000}
)

// Names of the tokentap.* histograms (the conventions have no time to first
// token or decode rate for clients); dashboards depend on them.
const (
	metricTimeToFirstToken      = "tokentap.time_to_first_token"
	metricOutputTokensPerSecond = "tokentap.output_tokens_per_second"
)

// Caps on the distinct values that come from traffic rather than from the
// configuration, process wide. A client can put anything in a request's
// model and an upstream anything in its response, and each new value would
// be a new time series in every histogram; past the cap a value is
// reported as OverflowLabelValue ("_other"; error.type: "_OTHER").
const (
	maxMetricModels     = 200
	maxMetricServers    = 100
	maxMetricErrorTypes = 100
)

// The value sets of those attributes share labels.go's process-wide table;
// their keys hold dots, which label names cannot, so they never collide.
var (
	requestModels  = valueSetFor("gen_ai.request.model", maxMetricModels)
	responseModels = valueSetFor("gen_ai.response.model", maxMetricModels)
	serverAddrs    = valueSetFor("server.address", maxMetricServers)
	errorTypes     = valueSetFor("error.type", maxMetricErrorTypes)
	serverPorts    = &portSet{max: maxMetricServers}
)

// The gen_ai.token.type attributes of the two token usage points.
var (
	tokenTypeInput  = semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeInput))
	tokenTypeOutput = semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeOutput))
)

// metricInstruments are the histograms of one MeterProvider.
type metricInstruments struct {
	// enabled is false for the no-op provider (OTEL_SDK_DISABLED), so that
	// no attribute set is built for nothing.
	enabled bool

	duration              metric.Float64Histogram
	tokenUsage            metric.Int64Histogram
	timeToFirstChunk      metric.Float64Histogram
	timePerChunk          metric.Float64Histogram
	timeToFirstToken      metric.Float64Histogram
	outputTokensPerSecond metric.Float64Histogram
}

// newMetricInstruments creates the instruments. The genaiconv constructors
// give the conventions' names, units and descriptions; the bucket
// boundaries are passed here because the constructors set none.
func newMetricInstruments(mp metric.MeterProvider, enabled bool) (*metricInstruments, error) {
	m := mp.Meter(instrumentationName, metric.WithInstrumentationVersion(version()))
	durations := metric.WithExplicitBucketBoundaries(durationBuckets...)
	ins := &metricInstruments{
		enabled: enabled,
	}
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	d, err := genaiconv.NewClientOperationDuration(m, durations)
	collect(err)
	ins.duration = d.Inst()
	u, err := genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	collect(err)
	ins.tokenUsage = u.Inst()
	ttfc, err := genaiconv.NewClientOperationTimeToFirstChunk(m, durations)
	collect(err)
	ins.timeToFirstChunk = ttfc.Inst()
	tpoc, err := genaiconv.NewClientOperationTimePerOutputChunk(m, durations)
	collect(err)
	ins.timePerChunk = tpoc.Inst()
	ins.timeToFirstToken, err = m.Float64Histogram(metricTimeToFirstToken,
		metric.WithUnit("s"),
		metric.WithDescription("Time from the request reaching the proxy to the first response event carrying generated output (text, reasoning or tool-call arguments); streamed responses only."),
		metric.WithExplicitBucketBoundaries(timeToFirstTokenBuckets...))
	collect(err)
	ins.outputTokensPerSecond, err = m.Float64Histogram(metricOutputTokensPerSecond,
		metric.WithUnit("{token}/s"),
		metric.WithDescription("Decode rate of a streamed response: (output tokens - 1) / (last output event - first output event)."),
		metric.WithExplicitBucketBoundaries(tokensPerSecondBuckets...))
	collect(err)
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating the metric instruments: %v", errs)
	}
	return ins, nil
}

// metricBufs pools the attribute slice each record builds, so that a
// request whose attributes were seen before allocates nothing.
var metricBufs = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 16)
	return &b
}}

// recordMetrics records a finished exchange's metric points, every one
// with f.ctx so that exemplars link to the exchange's span (the SDK keeps
// exemplars of sampled spans).
func (h *Handler) recordMetrics(f *finished) {
	if ins := h.metrics; ins != nil && ins.enabled {
		ins.record(f)
	}
}

func (ins *metricInstruments) record(f *finished) {
	m := f.m
	bp := metricBufs.Get().(*[]attribute.KeyValue)
	kvs := appendMetricAttributes((*bp)[:0], f)
	opts := metricAttrs.lookup(kvs)
	// Drop the references to this request's strings before pooling.
	clear(kvs)
	*bp = kvs[:0]
	metricBufs.Put(bp)

	ctx := f.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	all := opts.all[:]
	ins.duration.Record(ctx, m.Duration().Seconds(), all...)
	if m.Streamed {
		// The conventions: streaming calls only.
		if m.FirstChunk > 0 {
			ins.timeToFirstChunk.Record(ctx, m.FirstChunk.Seconds(), all...)
		}
		recordChunkGaps(ctx, ins.timePerChunk, &m.ChunkGaps, m.MaxChunkGap, all)
	}
	if m.FirstToken > 0 {
		ins.timeToFirstToken.Record(ctx, m.FirstToken.Seconds(), all...)
	}
	if rate, ok := m.OutputTokensPerSecond(); ok {
		ins.outputTokensPerSecond.Record(ctx, rate, all...)
	}

	// gen_ai.client.token.usage only for counts the provider reported:
	// the conventions forbid reporting usage that could not be obtained
	// unless the user enabled offline counting, and an estimate is
	// tokentap's guess. Input tokens are never estimated, so they are
	// recorded whenever known; output tokens only when reported (or
	// reported on request, "injected").
	u := &m.Usage
	if u.Source == meter.UsageAbsent {
		return
	}
	if u.InputTokens >= 0 {
		ins.tokenUsage.Record(ctx, u.InputTokens, opts.input[:]...)
	}
	if u.OutputTokens >= 0 && (u.Source == meter.UsageReported || u.Source == meter.UsageInjected) {
		ins.tokenUsage.Record(ctx, u.OutputTokens, opts.output[:]...)
	}
}

// appendMetricAttributes appends the attributes every point of an exchange
// carries. Values that come from traffic are capped and made valid UTF-8:
// Prometheus rejects a scrape, and OTLP a whole export, over one invalid
// string.
func appendMetricAttributes(kvs []attribute.KeyValue, f *finished) []attribute.KeyValue {
	m := f.m
	kvs = append(kvs,
		semconv.GenAIOperationNameKey.String(m.Operation),
		semconv.GenAIProviderNameKey.String(validUTF8(f.provider)),
		attrUsageSource.String(m.Usage.Source.String()),
	)
	if v := m.Request.Model; v != "" {
		kvs = append(kvs, semconv.GenAIRequestModelKey.String(requestModels.admit(validUTF8(v))))
	}
	if v := m.ResponseModel; v != "" {
		kvs = append(kvs, semconv.GenAIResponseModelKey.String(responseModels.admit(validUTF8(v))))
	}
	if f.host != "" {
		host := serverAddrs.admit(validUTF8(f.host))
		if host == OverflowLabelValue || f.port <= 0 {
			kvs = append(kvs, semconv.ServerAddressKey.String(host))
		} else if serverPorts.admit(f.port) {
			kvs = append(kvs, semconv.ServerAddressKey.String(host), semconv.ServerPortKey.Int(f.port))
		} else {
			kvs = append(kvs, semconv.ServerAddressKey.String(OverflowLabelValue))
		}
	}
	if v := m.ErrorType; v != "" {
		if v = errorTypes.admit(validUTF8(v)); v == OverflowLabelValue {
			v = string(genaiconv.ErrorTypeOther)
		}
		kvs = append(kvs, semconv.ErrorTypeKey.String(v))
	}
	for _, l := range f.labels {
		kvs = append(kvs, l.attr.String(validUTF8(l.value)))
	}
	return kvs
}

// maxCachedAttrSets bounds the attribute-set cache. The SDK itself keeps
// at most 2000 series per instrument; past this many distinct attribute
// combinations, recording builds its sets per request instead.
const maxCachedAttrSets = 2048

// metricAttrs caches the record options of each attribute combination seen.
// Building an attribute.Set (sorting, hashing and copying a dozen
// attributes) is most of recording's cost, and an exchange needs three
// (one for the histograms, one per token type); the combinations that
// traffic produces repeat, so each is built once.
var metricAttrs = newAttrCache(maxCachedAttrSets)

type attrCache struct {
	seed maphash.Seed
	max  int

	mu sync.RWMutex
	m  map[uint64]*attrEntry
	n  int
}

func newAttrCache(max int) *attrCache {
	return &attrCache{seed: maphash.MakeSeed(), max: max, m: map[uint64]*attrEntry{}}
}

// attrEntry is one attribute combination with its ready record options.
type attrEntry struct {
	// kvs is the combination as appendMetricAttributes built it (that
	// order), for telling hash collisions apart.
	kvs   []attribute.KeyValue
	opts  recordOpts
	other *attrEntry // next entry with the same hash
}

// recordOpts holds one record option per set: every histogram's, and the
// token usage's with gen_ai.token.type input or output.
type recordOpts struct {
	all, input, output [1]metric.RecordOption
}

// lookup returns the record options for kvs, building and caching them the
// first time. kvs is not kept.
func (c *attrCache) lookup(kvs []attribute.KeyValue) *recordOpts {
	h := c.hash(kvs)
	c.mu.RLock()
	e := c.m[h]
	for ; e != nil; e = e.other {
		if slices.Equal(e.kvs, kvs) {
			break
		}
	}
	c.mu.RUnlock()
	if e != nil {
		return &e.opts
	}
	e = &attrEntry{kvs: slices.Clone(kvs), opts: newRecordOpts(kvs)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= c.max {
		return &e.opts
	}
	for x := c.m[h]; x != nil; x = x.other {
		if slices.Equal(x.kvs, kvs) {
			return &x.opts // another request added it meanwhile
		}
	}
	e.other = c.m[h]
	c.m[h] = e
	c.n++
	return &e.opts
}

// hash hashes every key and value of kvs, in order.
func (c *attrCache) hash(kvs []attribute.KeyValue) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var num [8]byte
	for _, kv := range kvs {
		h.WriteString(string(kv.Key))
		h.WriteByte(byte(kv.Value.Type()))
		if kv.Value.Type() == attribute.STRING {
			h.WriteString(kv.Value.AsString())
		} else {
			// Metric attributes are strings and ints only.
			binary.LittleEndian.PutUint64(num[:], uint64(kv.Value.AsInt64()))
			h.Write(num[:])
		}
	}
	return h.Sum64()
}

// newRecordOpts builds the three attribute sets of a combination.
func newRecordOpts(kvs []attribute.KeyValue) recordOpts {
	var o recordOpts
	// NewSet sorts its argument, so each set gets a copy of its own.
	o.all[0] = metric.WithAttributeSet(attribute.NewSet(slices.Clone(kvs)...))
	withType := func(t attribute.KeyValue) metric.RecordOption {
		return metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(kvs), t)...))
	}
	o.input[0] = withType(tokenTypeInput)
	o.output[0] = withType(tokenTypeOutput)
	return o
}

// recordChunkGaps records gen_ai.client.operation.time_per_output_chunk:
// one point per chunk after the first, as the conventions define it. The
// meter keeps the gaps bucketed on the conventions' own boundaries with
// each bucket's sum, so each point is given its bucket's mean (to the
// nanosecond, the remainder spread so the points add up): bucket counts,
// total count and sum come out exact, and the largest gap is recorded as
// itself so the histogram's max is exact too.
//
// Only the largest gap is recorded in ctx, the exchange's span: a bucket's
// exemplar then points at a request whose worst gap fell there (a stall),
// and the other points skip the exemplar reservoir, which was nearly half
// the cost of each of these dozens of points per request.
func recordChunkGaps(ctx context.Context, h metric.Float64Histogram, g *meter.ChunkGaps, maxGap time.Duration, opts []metric.RecordOption) {
	bulk := context.Background()
	top := -1
	for i := len(g.Count) - 1; i >= 0; i-- {
		if g.Count[i] > 0 {
			top = i
			break
		}
	}
	for i := 0; i <= top; i++ {
		n, sum := int64(g.Count[i]), g.Sum[i]
		if n == 0 {
			continue
		}
		if i == top && maxGap > 0 && maxGap <= sum {
			h.Record(ctx, maxGap.Seconds(), opts...)
			n, sum = n-1, sum-maxGap
		}
		if n == 0 {
			continue
		}
		// The mean in whole nanoseconds, one nanosecond more for the
		// remainder's points, so that the points add up to the sum.
		mean := sum / time.Duration(n)
		up := int64(sum - mean*time.Duration(n))
		lo, hi := mean.Seconds(), (mean + 1).Seconds()
		for j := int64(0); j < n; j++ {
			if j < up {
				h.Record(bulk, hi, opts...)
			} else {
				h.Record(bulk, lo, opts...)
			}
		}
	}
}

// validUTF8 returns s, or s with each invalid byte sequence replaced by
// U+FFFD; it allocates only in the second case. Models, ids, finish reasons,
// error types and label values come from the wire, and OTLP and Prometheus
// carry strings that must be UTF-8: one bad value would make an exporter
// drop a whole batch, or a scrape fail.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// portSet caps the distinct upstream ports, like valueSet caps strings.
// Known ports are read from an immutable map without a lock or an
// allocation (a sync.Map would box each port); a new port copies the map,
// which happens at most max times in the life of the process.
type portSet struct {
	max  int
	mu   sync.Mutex
	seen atomic.Pointer[map[int]struct{}]
}

// admit reports whether port may be a metric attribute: known ports, and
// new ones while the set has room.
func (s *portSet) admit(port int) bool {
	if p := s.seen.Load(); p != nil {
		if _, ok := (*p)[port]; ok {
			return true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.seen.Load()
	if old != nil {
		if _, ok := (*old)[port]; ok {
			return true
		}
		if len(*old) >= s.max {
			return false
		}
	}
	next := make(map[int]struct{}, 1+lenOf(old))
	if old != nil {
		for k := range *old {
			next[k] = struct{}{}
		}
	}
	next[port] = struct{}{}
	s.seen.Store(&next)
	return true
}

func lenOf(m *map[int]struct{}) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
