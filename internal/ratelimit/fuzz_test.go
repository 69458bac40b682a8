package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

// FuzzRead gives every header Read looks at the same arbitrary value:
// whatever it is, Read must not panic, and what it reports must hold
// together: no negative count, reset or wait, none past the year bound,
// and a share within 0 to 1.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"60", "6m0s", "2m59.56s", "20ms", "2025-08-21T12:40:59Z",
		"2025-08-21T14:41:28.5+02:00", "Fri, 02 Jan 2026 15:04:45 GMT", "-1", "1e5", "9999999999999999999", ""} {
		f.Add(s, uint16(429))
	}
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string, status uint16) {
		h := http.Header{headerRetryAfter: {v}, headerRetryAfterMs: {v}}
		for _, fam := range families {
			h[fam.remaining], h[fam.limit], h[fam.reset] = []string{v}, []string{v}, []string{v}
		}
		var got Headers
		Read(h, int(status), now, &got)
		if got.RetryAfter < 0 || got.RetryAfter > maxDuration {
			t.Errorf("retry-after %v", got.RetryAfter)
		}
		for k := range got.Limits {
			l := &got.Limits[k]
			if l.Limit < 0 || l.Remaining < 0 || l.Reset < 0 || l.Reset > maxDuration {
				t.Errorf("%s: %+v", Kind(k), *l)
			}
			if s, ok := l.Share(); ok && (s < 0 || s > 1) {
				t.Errorf("%s: share %v", Kind(k), s)
			}
		}
	})
}
