package loadreport

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReadRun(t *testing.T) {
	single, err := json.Marshal(fakeReport(t0, 4, fast))
	if err != nil {
		t.Fatal(err)
	}
	sweep, err := json.Marshal(fakeSweep([]int{1, 2}, fast))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		data      string
		wantSweep bool
		wantErr   string
	}{
		{name: "a single run", data: string(single)},
		{name: "a sweep", data: string(sweep), wantSweep: true},
		{name: "empty", data: "", wantErr: "not JSON"},
		{name: "cut short", data: string(single[:len(single)/2]), wantErr: "not JSON"},
		{name: "an array", data: "[1, 2]", wantErr: "want a JSON object"},
		{name: "tokentap stats JSON", data: `{"window": "5m", "rows": []}`, wantErr: `neither "models" and "total" (a run) nor "levels" (a sweep)`},
		{name: "a sweep over something else", data: `{"sweep": "users", "levels": [{"models": [], "total": {}}]}`, wantErr: `a sweep over "users"`},
		{name: "a sweep without levels", data: `{"sweep": "rate", "levels": []}`, wantErr: "a sweep without a level"},
		{name: "a sweep whose level is not a report", data: `{"sweep": "rate", "levels": [{"rows": 1}]}`, wantErr: "sweep level 1 has no models"},
		{name: "models of the wrong type", data: `{"models": 3, "total": {}}`, wantErr: "does not read as one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := ReadRun("a.json", []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "a.json: ") {
					t.Fatalf("error %v, want one naming a.json and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if run.Name != "a.json" || (run.Sweep != nil) != tc.wantSweep || (run.Report != nil) == tc.wantSweep {
				t.Fatalf("run %+v, want a sweep: %v", run, tc.wantSweep)
			}
			if run.Report != nil && (len(run.Report.Models) != 1 || run.Report.Models[0].Distribution == nil || run.Report.Models[0].Timeline == nil) {
				t.Errorf("report read back without its model, distribution or timeline: %+v", run.Report)
			}
		})
	}
}
