// Package protofields reads and writes protobuf fields by hand, for the
// formats that tokentap saves itself (the live stats' history and the
// slowdown detectors' state): tagged fields, so that a later version's
// added field is skipped by an earlier reader, without generated code for
// a handful of messages. It wraps google.golang.org/protobuf's protowire.
package protofields

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Each calls f with each field of b: its number, type, value (for varints
// and fixed ones) and bytes (for length-delimited ones), skipping groups;
// malformed input is an error, as is the first error f returns.
func Each(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// AppendVarint appends field num as a varint.
func AppendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// AppendDouble appends field num as a fixed64 double.
func AppendDouble(b []byte, num protowire.Number, v float64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// AppendBytes appends field num as length-delimited bytes.
func AppendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// AppendString appends field num as a length-delimited string.
func AppendString(b []byte, num protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}
