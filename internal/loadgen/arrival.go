package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Arrival is how rate-mode requests are spaced in time.
type Arrival string

const (
	// ArrivalConstant starts request i at i/Rate: the steadiest load, and
	// the least like real traffic.
	ArrivalConstant Arrival = "constant"
	// ArrivalPoisson draws each gap from a gamma distribution of mean
	// 1/Rate and shape Burstiness: with Burstiness 1 (the default) the
	// gaps are exponential, a Poisson process, as independent users make;
	// below 1 the requests come in bursts, above 1 more evenly. This is
	// vLLM's bench serve's definition, so runs compare.
	ArrivalPoisson Arrival = "poisson"
)

// schedule gives the start offsets of a rate-mode run's requests.
type schedule struct {
	planned []Planned // a replay's, else nil
	rate    float64
	gamma   *distuv.Gamma // nil: constant
	at      float64       // the next request's offset, in seconds
	seq     int
}

// newSchedule returns cfg's schedule; cfg is validated.
func newSchedule(cfg *Config) *schedule {
	s := &schedule{rate: cfg.Rate, planned: cfg.Schedule}
	if cfg.Arrival == ArrivalPoisson {
		b := cfg.Burstiness
		// Mean alpha/beta = 1/rate, shape alpha = burstiness.
		s.gamma = &distuv.Gamma{Alpha: b, Beta: b * cfg.Rate, Src: rand.NewPCG(cfg.Seed, 0x70a7)}
	}
	return s
}

// next returns the offset from the run's start at which the next request
// is due.
func (s *schedule) next() time.Duration {
	if s.planned != nil {
		// more() ends the run at the schedule's end, so past it nothing
		// is due.
		d := time.Duration(math.MaxInt64)
		if s.seq < len(s.planned) {
			d = s.planned[s.seq].At
		}
		s.seq++
		return d
	}
	if s.gamma == nil {
		d := time.Duration(float64(s.seq) * float64(time.Second) / s.rate)
		s.seq++
		return d
	}
	// The first request starts at once, as in constant mode; each later
	// one a drawn gap after the one before.
	if s.seq > 0 {
		s.at += s.gamma.Rand()
	}
	s.seq++
	return time.Duration(s.at * float64(time.Second))
}

// validateArrival checks the arrival settings and fills their defaults.
func (cfg *Config) validateArrival() error {
	switch cfg.Arrival {
	case "":
		cfg.Arrival = ArrivalConstant
	case ArrivalConstant, ArrivalPoisson:
	default:
		return fmt.Errorf("arrival must be %q or %q, got %q", ArrivalConstant, ArrivalPoisson, cfg.Arrival)
	}
	if cfg.Burstiness == 0 {
		cfg.Burstiness = 1
	}
	if !(cfg.Burstiness > 0) || math.IsInf(cfg.Burstiness, 0) {
		return fmt.Errorf("burstiness must be a positive number, got %v", cfg.Burstiness)
	}
	if cfg.Arrival == ArrivalPoisson && cfg.Rate == 0 {
		return fmt.Errorf("poisson arrivals need a rate")
	}
	if cfg.Burstiness != 1 && cfg.Arrival != ArrivalPoisson {
		return fmt.Errorf("burstiness shapes poisson arrivals only")
	}
	if cfg.Warmup < 0 {
		return fmt.Errorf("warmup must not be negative, got %d", cfg.Warmup)
	}
	return nil
}
