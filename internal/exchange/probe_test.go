package exchange

import (
	"net/http"
	"testing"

	"github.com/tokentap/tokentap/internal/probe"
)

func TestTakeProbeHeaderAllocatesNothing(t *testing.T) {
	none := http.Header{"Content-Type": {"application/json"}}
	if n := testing.AllocsPerRun(100, func() { takeProbeHeader(none) }); n != 0 {
		t.Errorf("%v allocations per request without the header", n)
	}
	h, v := http.Header{}, []string{probe.Token()}
	if n := testing.AllocsPerRun(100, func() {
		h[probe.Header] = v
		if !takeProbeHeader(h) {
			t.Fatal("the token was not recognised")
		}
	}); n != 0 {
		t.Errorf("%v allocations per probe", n)
	}
}
