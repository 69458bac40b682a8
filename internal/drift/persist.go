package drift

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tokentap/tokentap/internal/protofields"
)

// A detector's state is written as protobuf-style tagged fields
// (protowire), so that a reader skips the fields it does not know and a
// field added later is a new tag: the live stats' history (package stats)
// carries it across a restart, so that a row keeps its baseline and, if
// it was slow, stays slow instead of learning again from nothing.
//
// The parameters are written with the state, as the row's detector keeps
// its configuration across config reloads: a restored row judges as it
// did before the restart.

// Field numbers of the detector's message.
const (
	fieldParams       = 1
	fieldRequests     = 2
	fieldIgnored      = 3
	fieldState        = 4
	fieldSlowMask     = 5
	fieldSince        = 6
	fieldSinceRequest = 7
	fieldSignal       = 8
)

// Field numbers of the parameters' message.
const (
	fieldBaseline    = 1
	fieldMinBaseline = 2
	fieldLag         = 3
	fieldCurrent     = 4
	fieldEvidence    = 5
	fieldCap         = 6
	fieldRateDelta   = 7
	fieldTTFTDelta   = 8
)

// Field numbers of a signal's message.
const (
	fieldSigKind      = 1
	fieldSigBase      = 2
	fieldSigBaseSeq   = 3
	fieldSigNextSeq   = 4
	fieldSigRecent    = 5
	fieldSigHead      = 6
	fieldSigRecentN   = 7
	fieldSigDrop      = 8
	fieldSigSlow      = 9
	fieldSigEvidence  = 10
	fieldSigMed       = 11
	fieldSigInvVar    = 12
	fieldSigTolerance = 13
)

// MaxEncodedSize bounds what AppendBinary writes: every field at its
// longest (varints of 10 bytes, a full baseline and lag ring per signal).
// A reader refuses more.
const MaxEncodedSize = paramsMax + 3 + 5*11 + 11 + int(numSignals)*(signalMax+3)

const (
	paramsMax = 4*11 + 4*9 + 2
	signalMax = 2 + 3 + MaxBaseline*4 + 3 + MaxBaseline + 11 + 3 + MaxLag*4 + 3*11 + 2 + 4*9
)

// AppendBinary appends the detector's state to b. A detector that has seen
// no request (the zero Detector, or one just initialised) writes its
// parameters only when it has them.
func (d *Detector) AppendBinary(b []byte) ([]byte, error) {
	if d.p.set {
		b = protowire.AppendTag(b, fieldParams, protowire.BytesType)
		b = protowire.AppendBytes(b, d.p.appendBinary(nil))
	}
	b = protofields.AppendVarint(b, fieldRequests, uint64(d.requests))
	b = protofields.AppendVarint(b, fieldIgnored, uint64(d.ignored))
	b = protofields.AppendVarint(b, fieldState, uint64(d.state))
	b = protofields.AppendVarint(b, fieldSlowMask, uint64(d.slowMask))
	if !d.since.IsZero() {
		b = protofields.AppendVarint(b, fieldSince, protowire.EncodeZigZag(d.since.UnixNano()))
	}
	b = protofields.AppendVarint(b, fieldSinceRequest, uint64(d.sinceRequest))
	if d.p.set {
		for k := range d.sig {
			b = protowire.AppendTag(b, fieldSignal, protowire.BytesType)
			b = protowire.AppendBytes(b, d.sig[k].appendBinary(nil, signalKind(k), &d.p))
		}
	}
	return b, nil
}

func (p *params) appendBinary(b []byte) []byte {
	b = protofields.AppendVarint(b, fieldBaseline, uint64(p.baseline))
	b = protofields.AppendVarint(b, fieldMinBaseline, uint64(p.minBaseline))
	b = protofields.AppendVarint(b, fieldLag, uint64(p.lag))
	b = protofields.AppendVarint(b, fieldCurrent, uint64(p.current))
	b = protofields.AppendDouble(b, fieldEvidence, p.evidence)
	b = protofields.AppendDouble(b, fieldCap, p.cap)
	b = protofields.AppendDouble(b, fieldRateDelta, p.sig[rate].delta)
	b = protofields.AppendDouble(b, fieldTTFTDelta, p.sig[ttft].delta)
	return b
}

func (g *signal) appendBinary(b []byte, k signalKind, p *params) []byte {
	b = protofields.AppendVarint(b, fieldSigKind, uint64(k))
	b = protowire.AppendTag(b, fieldSigBase, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(4*g.baseN))
	for _, v := range g.base[:g.baseN] {
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	b = protowire.AppendTag(b, fieldSigBaseSeq, protowire.BytesType)
	b = protowire.AppendBytes(b, g.baseSeq[:g.baseN])
	b = protofields.AppendVarint(b, fieldSigNextSeq, uint64(g.nextSeq))
	b = protowire.AppendTag(b, fieldSigRecent, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(4*p.lag))
	for _, v := range g.recent[:p.lag] {
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	b = protofields.AppendVarint(b, fieldSigHead, uint64(g.recentHead))
	b = protofields.AppendVarint(b, fieldSigRecentN, uint64(g.recentN))
	b = protofields.AppendVarint(b, fieldSigDrop, uint64(g.drop))
	if g.slow {
		b = protofields.AppendVarint(b, fieldSigSlow, 1)
	}
	b = protofields.AppendDouble(b, fieldSigEvidence, g.evidence)
	b = protofields.AppendDouble(b, fieldSigMed, g.med)
	b = protofields.AppendDouble(b, fieldSigInvVar, g.invVar)
	b = protofields.AppendDouble(b, fieldSigTolerance, g.tolerance)
	return b
}

// UnmarshalBinary replaces the detector's state with what AppendBinary
// wrote, checking every field against what a detector can hold, so that
// a corrupt or hostile input is an error and never a later panic. Unknown
// fields are skipped. On error the detector is left unchanged.
func (d *Detector) UnmarshalBinary(b []byte) error {
	if len(b) > MaxEncodedSize {
		return fmt.Errorf("detector state of %d bytes: at most %d", len(b), MaxEncodedSize)
	}
	var n Detector
	var since int64
	var hasSince bool
	var sigs [numSignals][]byte
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == fieldParams && typ == protowire.BytesType:
			return n.p.unmarshalBinary(raw)
		case num == fieldSignal && typ == protowire.BytesType:
			k, err := signalKindOf(raw)
			if err != nil {
				return err
			}
			if sigs[k] != nil {
				return fmt.Errorf("signal %d given twice", k)
			}
			sigs[k] = raw
		case typ != protowire.VarintType:
		case num == fieldRequests:
			n.requests = int64(v)
		case num == fieldIgnored:
			n.ignored = int64(v)
		case num == fieldState:
			if v > uint64(Slow) {
				return fmt.Errorf("state %d", v)
			}
			n.state = State(v)
		case num == fieldSlowMask:
			if v >= 1<<numSignals {
				return fmt.Errorf("slow mask %d", v)
			}
			n.slowMask = uint8(v)
		case num == fieldSince:
			since, hasSince = protowire.DecodeZigZag(v), true
		case num == fieldSinceRequest:
			n.sinceRequest = int64(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n.requests < 0 || n.ignored < 0 || n.sinceRequest < 0 || n.sinceRequest > n.requests {
		return errors.New("request counts out of range")
	}
	if hasSince {
		n.since = time.Unix(0, since)
	}
	if !n.p.set {
		if n != (Detector{}) || hasSince || sigs[rate] != nil || sigs[ttft] != nil {
			return errors.New("state without parameters")
		}
		*d = n
		return nil
	}
	for k := range sigs {
		if sigs[k] == nil {
			return fmt.Errorf("signal %d missing", k)
		}
		if err := n.sig[k].unmarshalBinary(sigs[k], &n.p); err != nil {
			return fmt.Errorf("signal %d: %v", k, err)
		}
	}
	var mask uint8
	for k := range n.sig {
		if n.sig[k].slow {
			mask |= 1 << k
		}
	}
	if mask != n.slowMask || (mask != 0) != (n.state == Slow) {
		return errors.New("state disagrees with the signals")
	}
	*d = n
	return nil
}

func (p *params) unmarshalBinary(b []byte) error {
	var rateDelta, ttftDelta float64
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		switch {
		case typ == protowire.VarintType && num <= fieldCurrent:
			if v > MaxBaseline {
				return fmt.Errorf("parameter %d: %d", num, v)
			}
			*[...]*int32{&p.baseline, &p.minBaseline, &p.lag, &p.current}[num-fieldBaseline] = int32(v)
		case typ == protowire.Fixed64Type && num >= fieldEvidence && num <= fieldTTFTDelta:
			*[...]*float64{&p.evidence, &p.cap, &rateDelta, &ttftDelta}[num-fieldEvidence] = math.Float64frombits(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case p.baseline < 16 || p.baseline > MaxBaseline, p.minBaseline < 8 || p.minBaseline > p.baseline,
		p.lag < 1 || p.lag > MaxLag, p.current < 1 || p.current > p.lag:
		return errors.New("parameters: ring sizes out of range")
	case !finite(p.evidence) || p.evidence < 2 || p.evidence > 50,
		!finite(p.cap) || p.cap <= 0 || p.evidence/p.cap < 1-1e-9 || p.evidence/p.cap > 16+1e-9:
		return errors.New("parameters: evidence out of range")
	case !finite(rateDelta) || rateDelta <= 0, !finite(ttftDelta) || ttftDelta <= 0 || ttftDelta > math.Log(101)+1e-9:
		return errors.New("parameters: thresholds out of range")
	}
	p.sig[rate] = newSigParams(-1, rateDelta)
	p.sig[ttft] = newSigParams(+1, ttftDelta)
	p.set = true
	return nil
}

func signalKindOf(b []byte) (signalKind, error) {
	k := uint64(numSignals)
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		if num == fieldSigKind && typ == protowire.VarintType {
			k = v
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if k >= uint64(numSignals) {
		return 0, fmt.Errorf("signal kind %d", k)
	}
	return signalKind(k), nil
}

func (g *signal) unmarshalBinary(b []byte, p *params) error {
	var base, seq, recent []byte
	var next, head, recentN, drop uint64
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case typ == protowire.BytesType:
			switch num {
			case fieldSigBase:
				base = raw
			case fieldSigBaseSeq:
				seq = raw
			case fieldSigRecent:
				recent = raw
			}
		case typ == protowire.VarintType:
			switch num {
			case fieldSigNextSeq:
				next = v
			case fieldSigHead:
				head = v
			case fieldSigRecentN:
				recentN = v
			case fieldSigDrop:
				drop = v
			case fieldSigSlow:
				g.slow = v != 0
			}
		case typ == protowire.Fixed64Type:
			f := math.Float64frombits(v)
			switch num {
			case fieldSigEvidence:
				g.evidence = f
			case fieldSigMed:
				g.med = f
			case fieldSigInvVar:
				g.invVar = f
			case fieldSigTolerance:
				g.tolerance = f
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := len(seq)
	if len(base) != 4*n || n > int(p.baseline) || len(recent) != 4*int(p.lag) || next > 255 {
		return errors.New("ring lengths out of range")
	}
	if head >= uint64(p.lag) || recentN > uint64(p.lag) || drop > recentN ||
		(recentN < uint64(p.lag) && head != recentN) {
		return errors.New("recent ring out of range")
	}
	g.baseN, g.nextSeq = int32(n), uint8(next)
	g.recentHead, g.recentN, g.drop = int32(head), int32(recentN), int32(drop)
	// The baseline is sorted, and its sequence numbers are the last n
	// handed out, each once: admit finds the oldest among them.
	var seen [256]bool
	for i := range n {
		v := math.Float32frombits(uint32(base[4*i]) | uint32(base[4*i+1])<<8 | uint32(base[4*i+2])<<16 | uint32(base[4*i+3])<<24)
		if !finite32(v) || i > 0 && v < g.base[i-1] {
			return errors.New("baseline not sorted finite values")
		}
		if age := g.nextSeq - seq[i]; int(age) == 0 || int(age) > n || seen[seq[i]] {
			return errors.New("baseline sequence numbers out of order")
		}
		seen[seq[i]] = true
		g.base[i], g.baseSeq[i] = v, seq[i]
	}
	for i := range int(p.lag) {
		v := math.Float32frombits(uint32(recent[4*i]) | uint32(recent[4*i+1])<<8 | uint32(recent[4*i+2])<<16 | uint32(recent[4*i+3])<<24)
		if !finite32(v) {
			return errors.New("recent value not finite")
		}
		g.recent[i] = v
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(g.evidence) || g.evidence < 0 || !finite(g.med) || !finite(g.invVar) || g.invVar < 0 || !finite(g.tolerance) || g.tolerance < 0 {
		return errors.New("statistics out of range")
	}
	return nil
}

func finite32(v float32) bool { return v == v && v <= math.MaxFloat32 && v >= -math.MaxFloat32 }
