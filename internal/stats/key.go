package stats

import (
	"hash/maphash"
	"slices"
	"strings"
	"unicode/utf8"
)

// OverflowValue is the provider and model of the overflow row, the row that
// takes every key once the store has MaxRows rows. It matches the
// caddymodule's overflow label value.
const OverflowValue = "_other"

// Bounds on one key, so that a client-chosen model name or a header-fed
// label value cannot make a row large: longer strings are cut (at a UTF-8
// boundary) and labels past MaxLabels are dropped.
const (
	MaxKeyString = 256
	MaxLabels    = 16
)

// Label is one configured label's value for a request.
type Label struct {
	Name  string
	Value string
}

// Key identifies a row: the provider (gen_ai.provider.name), the model (the
// response's, else the request's) and the configured labels, sorted by
// name.
type Key struct {
	Provider string
	Model    string
	Labels   []Label
}

// truncate cuts s to at most MaxKeyString bytes without splitting a UTF-8
// sequence. It returns a substring, so it never allocates.
func truncate(s string) string {
	if len(s) <= MaxKeyString {
		return s
	}
	i := MaxKeyString
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// labels returns k's labels within MaxLabels.
func (k *Key) labels() []Label {
	if len(k.Labels) > MaxLabels {
		return k.Labels[:MaxLabels]
	}
	return k.Labels
}

// normalize sorts k's labels by name, in place, if the caller did not.
func (k *Key) normalize() {
	for i := 1; i < len(k.Labels); i++ {
		if k.Labels[i].Name < k.Labels[i-1].Name {
			slices.SortFunc(k.Labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
			return
		}
	}
}

// hash hashes k as truncated, without allocating.
func (k *Key) hash(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	write := func(s string) {
		s = truncate(s)
		// The length first, so that ("ab","c") and ("a","bc") differ.
		var n [2]byte
		n[0], n[1] = byte(len(s)), byte(len(s)>>8)
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(s)
	}
	write(k.Provider)
	write(k.Model)
	for _, l := range k.labels() {
		write(l.Name)
		write(l.Value)
	}
	return h.Sum64()
}

// equal reports whether k, as truncated, is the stored key o.
func (k *Key) equal(o *Key) bool {
	ls := k.labels()
	if truncate(k.Provider) != o.Provider || truncate(k.Model) != o.Model || len(ls) != len(o.Labels) {
		return false
	}
	for i := range ls {
		if truncate(ls[i].Name) != o.Labels[i].Name || truncate(ls[i].Value) != o.Labels[i].Value {
			return false
		}
	}
	return true
}

// stored returns a copy of k, truncated, that shares no memory with the
// caller's strings (which may be views of large request buffers).
func (k *Key) stored() Key {
	c := Key{Provider: strings.Clone(truncate(k.Provider)), Model: strings.Clone(truncate(k.Model))}
	if ls := k.labels(); len(ls) > 0 {
		c.Labels = make([]Label, len(ls))
		for i, l := range ls {
			c.Labels[i] = Label{strings.Clone(truncate(l.Name)), strings.Clone(truncate(l.Value))}
		}
	}
	return c
}

// id is a canonical string of a key and its overflow flag, used to match
// rows of snapshots and to sort them: provider, model, then labels.
func (k *Key) id(overflow bool) string {
	var b strings.Builder
	if overflow {
		// The overflow row sorts after every other row.
		b.WriteByte(1)
	} else {
		b.WriteByte(0)
	}
	b.WriteString(k.Provider)
	b.WriteByte(0)
	b.WriteString(k.Model)
	for _, l := range k.Labels {
		b.WriteByte(0)
		b.WriteString(l.Name)
		b.WriteByte(0)
		b.WriteString(l.Value)
	}
	return b.String()
}

// overflowKey is the key of the overflow row.
var overflowKey = Key{Provider: OverflowValue, Model: OverflowValue}
