package simulator

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// rateWindow is one model's fixed one-minute window: when it began and the
// requests counted in it.
type rateWindow struct {
	mu    sync.Mutex
	start time.Time
	n     int
}

// rateWindows are the handler's windows by model; a model's window is
// made at its first request under a rate limit.
type rateWindows struct{ m sync.Map }

// take counts a request at now against limit per minute: what remains
// after it, when the window resets, and whether the request is allowed.
func (ws *rateWindows) take(model string, limit int, now time.Time) (remaining int, reset time.Duration, ok bool) {
	v, _ := ws.m.LoadOrStore(model, &rateWindow{})
	w := v.(*rateWindow)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() || now.Sub(w.start) >= time.Minute {
		w.start, w.n = now, 0
	}
	reset = w.start.Add(time.Minute).Sub(now)
	if w.n >= limit {
		return 0, reset, false
	}
	w.n++
	return limit - w.n, reset, true
}

// rateLimit applies p's rate limit, if it has one: it sets the format's
// rate limit headers, as the provider sends them on every response
// (Anthropic's with a reset time, OpenAI's and the others' with a duration;
// docs/telemetry.md, "Rate limits"), and answers a request past the limit
// 429 with retry-after. It reports whether the request goes on.
func (h *Handler) rateLimit(w http.ResponseWriter, f format, p *Plan, now time.Time) bool {
	limit := p.Profile.RateLimitRequests
	if limit <= 0 || h.windows == nil {
		return true
	}
	remaining, reset, ok := h.windows.take(p.Model, limit, now)
	hd := w.Header()
	if f.name() == FormatAnthropic {
		hd.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(limit))
		hd.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(remaining))
		hd.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(reset).UTC().Format(time.RFC3339))
	} else {
		hd.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(limit))
		hd.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(remaining))
		hd.Set("X-Ratelimit-Reset-Requests", reset.Round(time.Millisecond).String())
	}
	if ok {
		return true
	}
	// Whole seconds, rounded up, as RFC 9110's delay-seconds are.
	hd.Set("Retry-After", strconv.Itoa(int((reset+time.Second-1)/time.Second)))
	writeAPIError(w, f, statusError(http.StatusTooManyRequests))
	return false
}
