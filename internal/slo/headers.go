package slo

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// The headers in which a caller states its own objective for one request,
// in milliseconds, as serving stacks that route on per-request targets
// read them: the longest time to first token, and the longest time per
// output token after the first (whose inverse is the lowest output rate).
const (
	HeaderTTFT = "X-Slo-Ttft-Ms"
	HeaderTPOT = "X-Slo-Tpot-Ms"
)

// FromHeaders reads the objective a request states in HeaderTTFT and
// HeaderTPOT. ok reports whether it states a valid threshold. A header
// whose value is not one positive, finite number of milliseconds is left
// out of the objective and named in err, so that the caller can count it;
// the other header still counts.
func FromHeaders(h http.Header) (o Objective, ok bool, err error) {
	ttft, okTTFT, errTTFT := millis(h, HeaderTTFT)
	tpot, okTPOT, errTPOT := millis(h, HeaderTPOT)
	if okTTFT {
		o.TimeToFirstToken = time.Duration(ttft * float64(time.Millisecond))
	}
	if okTPOT {
		o.OutputTokensPerSecond = 1000 / tpot
	}
	if errTTFT != nil {
		err = errTTFT
	} else {
		err = errTPOT
	}
	return o, !o.Empty(), err
}

// millis reads one header as a positive, finite number of milliseconds,
// small enough to be a time.Duration. An absent header is not an error.
func millis(h http.Header, name string) (float64, bool, error) {
	vs, present := h[name]
	if !present {
		return 0, false, nil
	}
	if len(vs) != 1 {
		return 0, false, fmt.Errorf("%s given %d times", name, len(vs))
	}
	f, err := strconv.ParseFloat(vs[0], 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || f > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, false, fmt.Errorf("%s %q is not a positive number of milliseconds", name, truncate(vs[0], 32))
	}
	return f, true, nil
}

// truncate keeps an error message about a client's value short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
