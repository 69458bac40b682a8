package otelexport

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

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
// token usage's with gen_ai.token.type input or output; add is the first
// set as the counters take it, sloMet and sloMissed the same with
// tokentap.slo.met.
type recordOpts struct {
	// set is the histograms' attribute set, for the chunk gaps, which
	// tokentap aggregates itself.
	set                    attribute.Set
	all, input, output     [1]metric.RecordOption
	add, sloMet, sloMissed [1]metric.AddOption
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
			// Metric attributes are strings, ints and bools (tokentap.probe),
			// whose raw value AsInt64 returns.
			binary.LittleEndian.PutUint64(num[:], uint64(kv.Value.AsInt64()))
			h.Write(num[:])
		}
	}
	return h.Sum64()
}

// newRecordOpts builds the attribute sets of a combination.
func newRecordOpts(kvs []attribute.KeyValue) recordOpts {
	var o recordOpts
	// NewSet sorts its argument, so each set gets a copy of its own.
	o.set = attribute.NewSet(slices.Clone(kvs)...)
	all := metric.WithAttributeSet(o.set)
	o.all[0], o.add[0] = all, all
	withType := func(t attribute.KeyValue) metric.RecordOption {
		return metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(kvs), t)...))
	}
	o.input[0] = withType(tokenTypeInput)
	o.output[0] = withType(tokenTypeOutput)
	o.sloMet[0] = metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(kvs), attrSLOMet.Bool(true))...))
	o.sloMissed[0] = metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(kvs), attrSLOMet.Bool(false))...))
	return o
}
