package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Sweep is a run at several load levels in turn: how a model's time to
// first token and tokens/s change as load rises, which one level cannot
// show.
type Sweep struct {
	// Param is "concurrency" or "rate".
	Param string
	// Levels are its values, in the order run.
	Levels []float64
}

// ParseSweep reads --sweep: concurrency=1,2,4,8 or rate=0.5,1,2,4.
func ParseSweep(s string) (Sweep, error) {
	param, list, ok := strings.Cut(s, "=")
	if !ok || (param != "concurrency" && param != "rate") {
		return Sweep{}, fmt.Errorf("--sweep %q: want concurrency=1,2,4,8 or rate=0.5,1,2,4", s)
	}
	sw := Sweep{Param: param}
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return Sweep{}, fmt.Errorf("--sweep %s: level %q is not a positive number", param, f)
		}
		if param == "concurrency" && v != math.Trunc(v) {
			return Sweep{}, fmt.Errorf("--sweep concurrency: level %q is not a whole number of clients", f)
		}
		sw.Levels = append(sw.Levels, v)
	}
	return sw, nil
}

// SweepReport is a sweep's reports, one per level, each with the level in
// its concurrency or rate field.
type SweepReport struct {
	Sweep  string    `json:"sweep"`
	Levels []*Report `json:"levels"`
}

// RunSweep runs cfg at each level of sw in turn, each level a whole run of
// its own (its warm-up included), and stops at the first invalid level or
// when ctx ends.
func RunSweep(ctx context.Context, cfg Config, sw Sweep) (*SweepReport, error) {
	out := &SweepReport{Sweep: sw.Param}
	for _, v := range sw.Levels {
		level := cfg
		switch sw.Param {
		case "concurrency":
			level.Concurrency, level.Rate = int(v), 0
		case "rate":
			level.Rate = v
		default:
			return nil, fmt.Errorf("sweep over %q: want concurrency or rate", sw.Param)
		}
		rep, err := Run(ctx, level)
		if err != nil {
			return nil, fmt.Errorf("%s %g: %v", sw.Param, v, err)
		}
		out.Levels = append(out.Levels, rep)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// WriteTable writes each level's table under a heading naming the level.
func (s *SweepReport) WriteTable(w io.Writer) error {
	for i, rep := range s.Levels {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := rep.WriteTable(w); err != nil {
			return err
		}
	}
	return nil
}
