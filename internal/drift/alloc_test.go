package drift

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestObserveAllocationFree: Observe allocates nothing in any state.
func TestObserveAllocationFree(t *testing.T) {
	tests := []struct {
		name string
		// before is how many steady requests precede the measured ones,
		// rate their factor.
		before int
		rate   float64
	}{
		{"warming up", 10, 1},
		{"ok", 500, 1},
		{"slow", 500, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, 10))
			var d Detector
			for i := range tt.before {
				d.Observe(both(i, 50*lognormal(r, 0.2), 0.5*lognormal(r, 0.2)))
			}
			s := both(0, 50*tt.rate, 0.5)
			allocs := testing.AllocsPerRun(200, func() { d.Observe(s) })
			if allocs != 0 {
				t.Errorf("Observe allocates %v times per call, want 0", allocs)
			}
		})
	}
}

// TestStateBytes: a row's detector stays within 2 KiB.
func TestStateBytes(t *testing.T) {
	t.Logf("StateBytes = %d", StateBytes)
	if StateBytes > 2048 {
		t.Errorf("StateBytes = %d, want at most 2048", StateBytes)
	}
}

// TestZeroDetector: the zero Detector behaves as one made with the zero
// Config, and Init resets one.
func TestZeroDetector(t *testing.T) {
	tests := []struct {
		name string
		make func() *Detector
	}{
		{"New(Config{})", func() *Detector { d, _ := New(Config{}); return d }},
		{"New(DefaultConfig)", func() *Detector { d, _ := New(DefaultConfig); return d }},
		{"Init after use", func() *Detector {
			var d Detector
			for i := range 300 {
				d.Observe(both(i, 10, 9))
			}
			if err := d.Init(Config{}); err != nil {
				panic(err)
			}
			return &d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, 12))
			var zero Detector
			d := tt.make()
			for i := range 1000 {
				f := 1.0
				if i > 500 {
					f = 0.6
				}
				s := both(i, 50*f*lognormal(r, 0.2), 0.5*lognormal(r, 0.2))
				if zc, dc := zero.Observe(s), d.Observe(s); zc != dc || !reflect.DeepEqual(zero.Health(), d.Health()) {
					t.Fatalf("request %d: zero %+v, %s %+v", i, zero.Health(), tt.name, d.Health())
				}
			}
		})
	}
}

// TestInitRejects: a bad Config leaves the detector as it was.
func TestInitRejects(t *testing.T) {
	var d Detector
	for i := range 200 {
		d.Observe(both(i, 50, 0.5))
	}
	before := d
	if err := d.Init(Config{RateDrop: 2}); err == nil {
		t.Fatal("Init accepted a rate drop of 200 %")
	}
	if d != before {
		t.Error("a rejected Init changed the detector")
	}
}
