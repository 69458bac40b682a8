package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// sizedWords are common English words, each one token with its leading
// space in OpenAI's o200k and cl100k vocabularies, and not merged across
// words by their pre-tokenizer: a prompt of n of them is n tokens (plus
// the first word, which has no leading space), which SizedPrompts then
// checks with the tokenizer.
var sizedWords = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government number
night point home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community name president
team minute idea kid body information back parent face others level office door health person art war history
party result change morning reason research girl guy moment air teacher force education`)

// SizedPrompts returns n prompts whose lengths in tokens of the given
// encoding are drawn from a normal distribution of mean and stdev (at
// least 1; stdev 0 makes them all mean), each counted with the tokenizer,
// so that a run's input lengths are what was asked for.
func SizedPrompts(encoding string, mean, stdev, n int, seed uint64) ([]string, error) {
	if mean < 1 || stdev < 0 || n < 1 {
		return nil, fmt.Errorf("input tokens: want a mean of at least 1 and a standard deviation of at least 0, got %d,%d", mean, stdev)
	}
	c, err := tokencount.New(encoding)
	if err != nil {
		return nil, err
	}
	rnd := rand.New(rand.NewPCG(seed, 0x51ed))
	out := make([]string, n)
	for i := range out {
		want := mean
		if stdev > 0 {
			want = max(1, int(math.Round(float64(mean)+float64(stdev)*rnd.NormFloat64())))
		}
		out[i], err = sizedPrompt(c, want, rnd)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sizedPrompt makes one prompt of exactly want tokens. A word after the
// first is one token; the first, without its leading space, may be two,
// so the count is checked and the prompt trimmed or lengthened a word at
// a time until it is right.
func sizedPrompt(c *tokencount.Counter, want int, rnd *rand.Rand) (string, error) {
	words := make([]string, want)
	for i := range words {
		words[i] = sizedWords[rnd.IntN(len(sizedWords))]
	}
	for range 2*want + 16 {
		text := strings.Join(words, " ")
		got := int(c.Tokens([]byte(text)))
		switch {
		case got == want:
			return text, nil
		case got > want && len(words) > 1:
			words = words[:len(words)-1]
		case got > want:
			// A one-token prompt whose word is two without its space.
			words[0] = sizedWords[rnd.IntN(len(sizedWords))]
		default:
			words = append(words, sizedWords[rnd.IntN(len(sizedWords))])
		}
	}
	return "", fmt.Errorf("input tokens: no prompt of %d tokens in %s", want, c.Encoding())
}
