package stats

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/pb/sketchpb"
	"google.golang.org/protobuf/proto"
)

// TestSnapshotRoundTrip: a snapshot read back and written again is the same
// document, byte for byte, for every window and for rows with labels,
// overflow and unobserved metrics.
func TestSnapshotRoundTrip(t *testing.T) {
	s := newTestStore(3)
	keys, samples, times := traffic(500, 3)
	for i := range keys {
		record(s, keys[i], samples[i], times[i])
	}
	for _, w := range []Window{Window1m, Window5m, Window1h} {
		t.Run(w.String(), func(t *testing.T) {
			now := at(55 * time.Second)
			first, err := s.Aggregate(w, now).Snapshot(now)
			if err != nil {
				t.Fatal(err)
			}
			b1, _ := json.Marshal(first)
			back, err := ParseSnapshot(b1)
			if err != nil {
				t.Fatal(err)
			}
			agg, err := back.Aggregate()
			if err != nil {
				t.Fatal(err)
			}
			second, err := agg.Snapshot(now)
			if err != nil {
				t.Fatal(err)
			}
			b2, _ := json.Marshal(second)
			if string(b1) != string(b2) {
				t.Errorf("round trip changed the snapshot:\n%s\n%s", b1, b2)
			}
			if len(first.Rows) != 4 || !first.Rows[3].Overflow || first.Version != SnapshotVersion || first.Window != w.String() {
				t.Errorf("snapshot: version %d, window %s, %d rows", first.Version, first.Window, len(first.Rows))
			}
		})
	}
}

// sketchOf encodes a sketch of accuracy acc holding values.
func sketchOf(t *testing.T, acc float64, values ...float64) string {
	t.Helper()
	sk, err := ddsketch.LogUnboundedDenseDDSketch(acc)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := sk.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := proto.Marshal(sk.ToProto())
	return base64.StdEncoding.EncodeToString(b)
}

func protoSketch(t *testing.T, pb *sketchpb.DDSketch) string {
	t.Helper()
	pb.Mapping = indexMapping.ToProto()
	b, _ := proto.Marshal(pb)
	return base64.StdEncoding.EncodeToString(b)
}

// TestParseSnapshotErrors: documents that are not this version's sketches,
// or whose sketches could not come from valid values, are refused with a
// message that says why.
func TestParseSnapshotErrors(t *testing.T) {
	row := func(sketch string) string {
		return `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","labels":{},"requests":1,"sketches":{"duration":"` + sketch + `"}}]}`
	}
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"not JSON", `<html>`, "not a tokentap sketches document"},
		{"no version", `{"rows":[]}`, "no version"},
		{"future version", `{"version":2,"rows":[]}`, "sketches version 2"},
		{"bad window", `{"version":1,"window":"2m","rows":[]}`, `window "2m"`},
		{"negative count", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":-1}]}`, "negative count"},
		{"negative cost", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"cost_usd":-0.5}]}`, "cost_usd -0.5"},
		{"cost past the range", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"cost_usd":1e300}]}`, "cost_usd 1e+300"},
		{"more met than judged", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":3,"slo_requests":2,"slo_met":3}]}`, "slo_met 3 over slo_requests 2"},
		{"negative goodput", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"goodput_tokens":-5}]}`, "negative count"},
		{"unknown health state", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"health":{"state":"degraded"}}]}`, `health state "degraded"`},
		{"not base64", row("!!!"), "not base64"},
		{"not protobuf", row(base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff})), "not a DDSketch protobuf"},
		{"other accuracy", row(sketchOf(t, 0.02, 1, 2, 3)), "relative accuracy 0.02"},
		{"bin index far out of range", row(protoSketch(t, &sketchpb.DDSketch{
			PositiveValues: &sketchpb.Store{BinCounts: map[int32]float64{1 << 30: 1}},
		})), "out of range"},
		{"contiguous bins out of range", row(protoSketch(t, &sketchpb.DDSketch{
			PositiveValues: &sketchpb.Store{ContiguousBinCounts: []float64{1, 1, 1}, ContiguousBinIndexOffset: int32(maxIndex - 1)},
		})), "out of range"},
		{"negative bin count", row(protoSketch(t, &sketchpb.DDSketch{
			PositiveValues: &sketchpb.Store{BinCounts: map[int32]float64{10: -1}},
		})), "bad bin count"},
		{"negative values", row(protoSketch(t, &sketchpb.DDSketch{
			NegativeValues: &sketchpb.Store{BinCounts: map[int32]float64{10: 1}},
		})), "negative values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := ParseSnapshot([]byte(tt.doc))
			if err == nil {
				_, err = snap.Aggregate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestSnapshotSkipsUnknownMetrics: a metric a newer instance adds is
// skipped, and the known ones are still read.
func TestSnapshotSkipsUnknownMetrics(t *testing.T) {
	doc := `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","labels":{"team":"x"},"requests":2,
		"sketches":{"duration":"` + sketchOf(t, RelativeAccuracy, 1, 3) + `","time_to_dream":"AAAA"}}]}`
	snap, err := ParseSnapshot([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a, err := snap.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	r := a.Rows()[0]
	if r.Count(Duration) != 2 || len(r.Key.Labels) != 1 || r.Key.Labels[0] != (Label{"team", "x"}) {
		t.Errorf("row %+v, %d duration points", r.Key, r.Count(Duration))
	}
}
