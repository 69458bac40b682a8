package loadgen

import (
	"time"
)

// The timeline's bounds. A run's requests are put in intervals of equal
// width by when they finished; the width starts at firstInterval and
// doubles, merging neighbouring intervals pairwise, whenever a request
// finishes past maxIntervals of them. So a timeline never holds more than
// maxIntervals intervals however long the run (a duration-bounded run and
// a count-bounded one alike, whose length is not known in advance), and a
// run longer than maxIntervals × firstInterval has between maxIntervals/2
// and maxIntervals of them: enough points for a line, each interval with
// requests enough for a median.
const (
	maxIntervals  = 64
	firstInterval = 100 * time.Millisecond
)

// Timeline is a model's requests over the run's time, in intervals of
// equal width by when each request finished, for charts of a run that
// changes as it goes (a server warming up, a queue building, a throttle).
type Timeline struct {
	// IntervalSeconds is the intervals' width: 0.1 s doubled as often as
	// the run's length needed to keep at most 64 intervals.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Intervals are in time order, from the first that had a request
	// finish to the last; those between without one are included, empty.
	Intervals []Interval `json:"intervals"`
}

// Interval is one slice of a run's time and the requests that finished
// in it.
type Interval struct {
	// StartSeconds and EndSeconds bound the interval, in seconds from
	// Report.Started.
	StartSeconds float64 `json:"start_seconds"`
	EndSeconds   float64 `json:"end_seconds"`
	// Requests counts the requests that finished in the interval, Failed
	// those of them that failed; OutputTokens is the completed ones'
	// output.
	Requests     int   `json:"requests"`
	Failed       int   `json:"failed"`
	OutputTokens int64 `json:"output_tokens"`
	// TimeToFirstToken (seconds) and OutputTokensPerSecond are the
	// completed requests' in the interval, as in ModelReport.
	TimeToFirstToken      Quantiles `json:"time_to_first_token_seconds"`
	OutputTokensPerSecond Quantiles `json:"output_tokens_per_second"`
}

// timeline collects a model's requests by when they finished, offset from
// origin: the start of the first request it was given, which no later
// request ends before (requests are added as they finish).
type timeline struct {
	origin    time.Time
	width     time.Duration
	intervals []*interval // index i covers [i·width, (i+1)·width) from origin
}

// interval is an Interval being collected; nil in timeline.intervals
// until a request finishes in it.
type interval struct {
	requests, failed int
	tokens           int64
	ttft, tps        *series
}

func newTimeline() *timeline { return &timeline{width: firstInterval} }

// add puts r in the interval in which it finished.
func (t *timeline) add(r *Result) {
	if t.origin.IsZero() {
		t.origin = r.Start
	}
	end := r.Start.Add(r.End).Sub(t.origin)
	if end < 0 {
		end = 0 // a request that started before the first added ended at once
	}
	for end >= maxIntervals*t.width {
		t.coarsen()
	}
	i := int(end / t.width)
	for len(t.intervals) <= i {
		t.intervals = append(t.intervals, nil)
	}
	iv := t.intervals[i]
	if iv == nil {
		iv = &interval{ttft: newSeries(), tps: newSeries()}
		t.intervals[i] = iv
	}
	iv.requests++
	if !r.OK() {
		iv.failed++
		return
	}
	iv.tokens += int64(r.OutputTokens)
	if ttft := r.TimeToFirstToken(); ttft > 0 {
		iv.ttft.add(ttft.Seconds())
	}
	if tps := r.OutputTokensPerSecond(); tps > 0 {
		iv.tps.add(tps)
	}
}

// coarsen doubles the width, merging intervals 2i and 2i+1 into i.
func (t *timeline) coarsen() {
	merged := t.intervals[:0]
	for i := 0; i < len(t.intervals); i += 2 {
		a := t.intervals[i]
		if i+1 < len(t.intervals) {
			a = a.merge(t.intervals[i+1])
		}
		merged = append(merged, a)
	}
	clear(t.intervals[len(merged):])
	t.intervals = merged
	t.width *= 2
}

// merge adds b to a and returns the sum; either may be nil.
func (a *interval) merge(b *interval) *interval {
	if a == nil {
		return b
	}
	if b != nil {
		a.requests += b.requests
		a.failed += b.failed
		a.tokens += b.tokens
		a.ttft.merge(b.ttft)
		a.tps.merge(b.tps)
	}
	return a
}

// merge adds o's samples to s.
func (s *series) merge(o *series) {
	if s.s.MergeWith(o.s) == nil { // the same mapping: never an error
		s.sum += o.sum
	}
}

// report is the Timeline with times from start, the report's start; nil
// when no request finished.
func (t *timeline) report(start time.Time) *Timeline {
	first := -1
	for i, iv := range t.intervals {
		if iv != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	shift := t.origin.Sub(start).Seconds()
	w := t.width.Seconds()
	tl := &Timeline{IntervalSeconds: w, Intervals: make([]Interval, 0, len(t.intervals)-first)}
	for i := first; i < len(t.intervals); i++ {
		out := Interval{StartSeconds: shift + float64(i)*w, EndSeconds: shift + float64(i+1)*w}
		if iv := t.intervals[i]; iv != nil {
			out.Requests, out.Failed, out.OutputTokens = iv.requests, iv.failed, iv.tokens
			out.TimeToFirstToken, out.OutputTokensPerSecond = iv.ttft.quantiles(), iv.tps.quantiles()
		}
		tl.Intervals = append(tl.Intervals, out)
	}
	return tl
}
