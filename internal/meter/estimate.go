package meter

// Estimator counts the tokens of generated text, decoded (no JSON escapes
// left), for streams whose provider will report no usage: OpenAI-style
// streams whose request did not ask for stream_options.include_usage. A
// real tokenizer (package tokencount) belongs here; it allocates and costs
// microseconds per delta, so it is used only for those streams, and
// EstimateTokens, free and allocation-free, covers the rest (the partial
// counts of aborted streams). Implementations must be safe for concurrent
// use: one serves every exchange.
type Estimator interface {
	Tokens(text []byte) int64
}

// EstimateTokens estimates how many tokens a fragment of generated text
// holds, for streams that carry no usage. s is the text as it appears inside
// a JSON string, escapes included, so it can be read straight from the wire
// without decoding or allocating.
//
// The rule follows how byte-pair tokenizers (OpenAI's cl100k/o200k, Llama's)
// split English: a word with its leading space is one token, long words split
// every ~12 letters, digits group in threes, each punctuation mark and each
// run of other whitespace is a token, and a non-ASCII character is about one
// token. Streams deliver one or a few tokens per delta, so the rule is applied
// delta by delta and never needs the whole text. docs/telemetry.md gives the
// measured error on fixtures whose usage is known.
func EstimateTokens(s []byte) int64 {
	var n int64
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isLetter(c):
			j := i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			n += 1 + int64(j-i-1)/12
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n += int64(j-i+2) / 3
			i = j
		case c == ' ':
			// A single space belongs to the word after it.
			if i+1 < len(s) && s[i+1] != ' ' && s[i+1] != '\\' {
				i++
				continue
			}
			j := i
			for j < len(s) && s[j] == ' ' {
				j++
			}
			n++
			i = j
		case c == '\\':
			// A JSON escape: \uXXXX is one character; \n, \t, \" and
			// friends are whitespace or punctuation, one token per run of
			// newlines and tabs.
			if i+1 < len(s) && s[i+1] == 'u' {
				n++
				i += 6
				continue
			}
			if i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 't' || s[i+1] == 'r') {
				j := i
				for j+1 < len(s) && s[j] == '\\' && (s[j+1] == 'n' || s[j+1] == 't' || s[j+1] == 'r') {
					j += 2
				}
				n++
				i = j
				continue
			}
			n++
			i += 2
		case c >= 0xC0:
			// The lead byte of a multi-byte UTF-8 character.
			n++
			i++
		case c >= 0x80:
			// A continuation byte: part of the character already counted.
			i++
		default:
			// Punctuation: tokenizers merge short runs ("...", "\"):", ").")
			// and the line break that often follows them.
			j := i
			for j < len(s) && isPunct(s[j]) {
				j++
			}
			if j == i {
				// A raw control character or DEL: invalid inside a JSON
				// string, but a hostile upstream can send it, and the loop
				// must always move on.
				n++
				i++
				continue
			}
			n += int64(j-i+1) / 2
			i = j
			if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'n' {
				for i+1 < len(s) && s[i] == '\\' && s[i+1] == 'n' {
					i += 2
				}
			}
		}
	}
	return n
}

func isLetter(c byte) bool {
	return (c|0x20) >= 'a' && (c|0x20) <= 'z'
}

// isPunct reports whether c is ASCII punctuation other than the JSON escape
// character, which starts an escape sequence instead.
func isPunct(c byte) bool {
	return c > ' ' && c < 0x7f && c != '\\' && !isLetter(c) && (c < '0' || c > '9')
}
