package drift

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tokentap/tokentap/internal/protofields"
)

// persistRun feeds d n requests of a steady row whose rate falls to a
// tenth from request slowAt on (never, when slowAt is 0).
func persistRun(d *Detector, from, n, slowAt int) {
	for i := from; i < from+n; i++ {
		rate := 40 + float64(i%7)
		if slowAt > 0 && i >= slowAt {
			rate /= 10
		}
		s := both(i, rate, 0.2+float64(i%3)/100)
		if i%17 == 0 {
			s.RateOK = false
		}
		d.Observe(s)
	}
}

// TestDetectorPersist writes detectors in each state and reads them back:
// the copy equals the original, field by field, and judges the requests
// that follow exactly as the original does.
func TestDetectorPersist(t *testing.T) {
	small := Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2}
	cases := []struct {
		name      string
		cfg       Config
		n, slowAt int
		want      State
	}{
		{"never observed", Config{}, 0, 0, InsufficientData},
		{"learning", Config{}, 30, 0, InsufficientData},
		{"ok, baseline full and turning", small, 300, 0, OK},
		{"slow", small, 300, 250, Slow},
		{"defaults, ok", Config{}, 400, 0, OK},
		{"defaults, slow", Config{}, 400, 330, Slow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			persistRun(d, 0, c.n, c.slowAt)
			if d.State() != c.want {
				t.Fatalf("fixture is %s, want %s", d.State(), c.want)
			}
			b, err := d.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxEncodedSize {
				t.Errorf("%d bytes, over MaxEncodedSize %d", len(b), MaxEncodedSize)
			}
			var got Detector
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if got.since.UnixNano() != d.since.UnixNano() {
				t.Errorf("since %v, want %v", got.since, d.since)
			}
			got.since = d.since // the monotonic reading does not survive, as it should not
			if got != *d {
				t.Errorf("read back differs:\n got %+v\nwant %+v", got, *d)
			}
			for i := c.n; i < c.n+200; i++ {
				persistRun(d, i, 1, c.slowAt)
				persistRun(&got, i, 1, c.slowAt)
				if got.Health() != d.Health() {
					t.Fatalf("request %d: health %+v, want %+v", i, got.Health(), d.Health())
				}
			}
		})
	}
}

// TestDetectorPersistFull checks MaxEncodedSize against a detector whose
// rings are all full.
func TestDetectorPersistFull(t *testing.T) {
	d, _ := New(Config{})
	persistRun(d, 0, 2*(MaxBaseline+MaxLag), 0)
	b, _ := d.AppendBinary(nil)
	if len(b) > MaxEncodedSize || len(b) < MaxEncodedSize*3/4 {
		t.Errorf("full detector: %d bytes, want within 3/4 of MaxEncodedSize %d and under it", len(b), MaxEncodedSize)
	}
}

// TestDetectorPersistRefused corrupts a written detector in ways that
// would break it later: each is refused and leaves the detector as it
// was.
func TestDetectorPersistRefused(t *testing.T) {
	small := Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2}
	d, _ := New(small)
	persistRun(d, 0, 300, 250)
	good, _ := d.AppendBinary(nil)
	params := d.p.appendBinary(nil)
	cases := []struct {
		name string
		b    []byte
	}{
		{"truncated", good[:len(good)-3]},
		{"too long", make([]byte, MaxEncodedSize+1)},
		{"state without parameters", protofields.AppendVarint(nil, fieldRequests, 3)},
		{"state 3", append(append([]byte(nil), good...), protofields.AppendVarint(nil, fieldState, 3)...)},
		{"ok while a signal is slow", append(append([]byte(nil), good...), protofields.AppendVarint(nil, fieldState, uint64(OK))...)},
		{"since after the requests", append(append([]byte(nil), good...), protofields.AppendVarint(nil, fieldSinceRequest, 1<<40)...)},
		{"lag 0", append(append([]byte(nil), good...), protofields.AppendBytes(nil, fieldParams, protofields.AppendVarint(append([]byte(nil), params...), fieldLag, 0))...)},
		{"baseline 200", append(append([]byte(nil), good...), protofields.AppendBytes(nil, fieldParams, protofields.AppendVarint(append([]byte(nil), params...), fieldBaseline, 200))...)},
		{"a signal missing", onlyFirstSignal(good)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := *d
			if err := got.UnmarshalBinary(c.b); err == nil {
				t.Fatalf("accepted")
			}
			if got != *d {
				t.Errorf("detector changed by a refused read")
			}
		})
	}
}

// onlyFirstSignal drops every signal's message but the first.
func onlyFirstSignal(b []byte) []byte {
	var out []byte
	signals := 0
	_ = protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch typ {
		case protowire.BytesType:
			if num == fieldSignal {
				if signals++; signals > 1 {
					return nil
				}
			}
			out = protofields.AppendBytes(out, num, raw)
		case protowire.VarintType:
			out = protofields.AppendVarint(out, num, v)
		}
		return nil
	})
	return out
}

// FuzzDetectorState feeds arbitrary bytes to the detector's reader: it
// refuses what it cannot hold, never panics, and a detector it accepts
// observes, reports and writes itself again without panicking.
func FuzzDetectorState(f *testing.F) {
	for _, c := range []struct {
		cfg       Config
		n, slowAt int
	}{{Config{}, 0, 0}, {Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2}, 300, 250}, {Config{}, 200, 0}} {
		d, _ := New(c.cfg)
		persistRun(d, 0, c.n, c.slowAt)
		b, _ := d.AppendBinary(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Detector
		if err := d.UnmarshalBinary(b); err != nil {
			return
		}
		for i := range 3 * MaxBaseline {
			d.Observe(both(i, 1+float64(i%9), 0.1))
			_ = d.Health()
		}
		if _, err := d.AppendBinary(nil); err != nil {
			t.Fatal(err)
		}
	})
}
