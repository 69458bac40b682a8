package loadgen

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SLO is a service-level objective each completed request is held to, for
// the report's goodput: the requests, and the output tokens per second of
// the run, that met it. Zero thresholds are not part of it.
type SLO struct {
	// TimeToFirstToken is the longest time to first token that meets.
	TimeToFirstToken time.Duration
	// OutputTokensPerSecond is the lowest decode rate that meets, judged
	// where the rate is defined (two tokens or more, apart in time).
	OutputTokensPerSecond float64
}

// Set reports whether s has a threshold.
func (s SLO) Set() bool { return s.TimeToFirstToken > 0 || s.OutputTokensPerSecond > 0 }

// Met reports whether r met s: completed, first token within the bound, a
// rate at or over the bound where it has one.
func (s SLO) Met(r *Result) bool {
	if !r.OK() {
		return false
	}
	if s.TimeToFirstToken > 0 {
		if ttft := r.TimeToFirstToken(); ttft <= 0 || ttft > s.TimeToFirstToken {
			return false
		}
	}
	if s.OutputTokensPerSecond > 0 {
		if tps := r.OutputTokensPerSecond(); tps > 0 && tps < s.OutputTokensPerSecond {
			return false
		}
	}
	return true
}

// ParseSLO reads --slo: ttft=500ms,tps=30 (either or both).
func ParseSLO(v string) (SLO, error) {
	var s SLO
	for _, part := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return SLO{}, fmt.Errorf("--slo %q: want ttft=500ms,tps=30", v)
		case name == "ttft":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return SLO{}, fmt.Errorf("--slo ttft %q: want a positive duration such as 500ms", val)
			}
			s.TimeToFirstToken = d
		case name == "tps":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return SLO{}, fmt.Errorf("--slo tps %q: want a positive number of tokens per second", val)
			}
			s.OutputTokensPerSecond = f
		default:
			return SLO{}, fmt.Errorf("--slo %q: unknown threshold %q (ttft, tps)", v, name)
		}
	}
	return s, nil
}

// Goodput is how a model's requests fared against the run's SLO.
type Goodput struct {
	// Met counts the completed requests that met it; Attainment is Met
	// over every request sent (a failure misses it).
	Met        int     `json:"met"`
	Attainment float64 `json:"attainment"`
	// TokenGoodput is the output tokens of the requests that met it over
	// the run's elapsed time: the useful part of Throughput.
	TokenGoodput float64 `json:"token_goodput"`
}

// SLOReport is the objective as the report states it.
type SLOReport struct {
	TimeToFirstToken      float64 `json:"time_to_first_token_seconds,omitempty"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second,omitempty"`
}

func sloReport(s SLO) *SLOReport {
	if !s.Set() {
		return nil
	}
	return &SLOReport{TimeToFirstToken: s.TimeToFirstToken.Seconds(), OutputTokensPerSecond: s.OutputTokensPerSecond}
}

func sloText(s *SLOReport) string {
	var parts []string
	if s.TimeToFirstToken > 0 {
		parts = append(parts, "ttft <= "+(time.Duration(s.TimeToFirstToken*float64(time.Second))).String())
	}
	if s.OutputTokensPerSecond > 0 {
		parts = append(parts, "tok/s >= "+strconv.FormatFloat(s.OutputTokensPerSecond, 'g', -1, 64))
	}
	return strings.Join(parts, ", ")
}
