package slo

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		name    string
		header  http.Header
		want    Objective
		ok      bool
		wantErr string
	}{
		{"none", http.Header{}, Objective{}, false, ""},
		{"time to first token", http.Header{HeaderTTFT: {"250"}}, Objective{TimeToFirstToken: 250 * time.Millisecond}, true, ""},
		{"fractional milliseconds", http.Header{HeaderTTFT: {"0.5"}}, Objective{TimeToFirstToken: 500 * time.Microsecond}, true, ""},
		{"time per output token is an output rate", http.Header{HeaderTPOT: {"20"}}, Objective{OutputTokensPerSecond: 50}, true, ""},
		{"both", http.Header{HeaderTTFT: {"1000"}, HeaderTPOT: {"40"}}, Objective{TimeToFirstToken: time.Second, OutputTokensPerSecond: 25}, true, ""},
		{"not a number", http.Header{HeaderTTFT: {"soon"}}, Objective{}, false, `X-Slo-Ttft-Ms "soon" is not a positive number`},
		{"zero", http.Header{HeaderTPOT: {"0"}}, Objective{}, false, "X-Slo-Tpot-Ms \"0\""},
		{"negative", http.Header{HeaderTTFT: {"-5"}}, Objective{}, false, "not a positive number"},
		{"infinite", http.Header{HeaderTTFT: {"Inf"}}, Objective{}, false, "not a positive number"},
		{"NaN", http.Header{HeaderTPOT: {"NaN"}}, Objective{}, false, "not a positive number"},
		{"past a duration's range", http.Header{HeaderTTFT: {"1e300"}}, Objective{}, false, "not a positive number"},
		{"twice", http.Header{HeaderTTFT: {"1", "2"}}, Objective{}, false, "given 2 times"},
		{"one bad, the other still counts", http.Header{HeaderTTFT: {"x"}, HeaderTPOT: {"10"}}, Objective{OutputTokensPerSecond: 100}, true, "X-Slo-Ttft-Ms"},
		{"a long value is cut in the error", http.Header{HeaderTTFT: {strings.Repeat("9", 40) + "x"}}, Objective{}, false, "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok, err := FromHeaders(tt.header)
			if o != tt.want || ok != tt.ok {
				t.Errorf("objective %+v (ok %v), want %+v (ok %v)", o, ok, tt.want, tt.ok)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestFromHeadersAllocations: reading the headers of a request that states
// a valid objective, or none, allocates nothing.
func TestFromHeadersAllocations(t *testing.T) {
	h := http.Header{HeaderTTFT: {"250"}, HeaderTPOT: {"20"}}
	none := http.Header{"Content-Type": {"application/json"}}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = FromHeaders(h); _, _, _ = FromHeaders(none) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
