package drift

import (
	"math"
	"math/rand/v2"
)

// The two noise models docs/drift.md measures, as factors on a request's true
// value. Each is drawn independently for every signal of every request.

// uniform is 1+u, u uniform in [-w, +w]: "20 % jitter" for w = 0.2.
func uniform(r *rand.Rand, w float64) float64 { return 1 + w*(2*r.Float64()-1) }

// lognormal is exp(σ·z), z standard normal: median 1, and σ the spread of
// ln(value).
func lognormal(r *rand.Rand, sigma float64) float64 { return math.Exp(sigma * r.NormFloat64()) }

// noiseModel names a noise model with its parameter.
type noiseModel struct {
	name   string
	factor func(*rand.Rand) float64
}

var (
	uniform20   = noiseModel{"uniform ±20 %", func(r *rand.Rand) float64 { return uniform(r, 0.2) }}
	lognormal20 = noiseModel{"log-normal σ 0.2", func(r *rand.Rand) float64 { return lognormal(r, 0.2) }}
	// The two models docs/drift.md reports; the tests assert their bounds on these.
	issueNoise = []noiseModel{uniform20, lognormal20}
)
