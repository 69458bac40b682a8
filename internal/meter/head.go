package meter

// maxRepeatedHead bounds the head an Observer keeps. OpenAI's chunk heads
// (id, object, created, model, service_tier, system_fingerprint) fit with
// room for long model names; a longer head is not kept, and its chunks are
// read whole.
const maxRepeatedHead = 256

// repeatedHead is the start of the last JSON chunk a dialect read, up to
// (not including) the key of its first member that acts: the members
// before it are ones a repeat of changes nothing. A chunk that begins with
// the same bytes can be read from there on. It is kept by value, in the
// Observer, so that keeping it allocates nothing.
type repeatedHead struct {
	n int
	b [maxRepeatedHead]byte
}

// skip returns where reading s may start: the length of the head when s
// begins with it and has more after it, else 0.
func (h *repeatedHead) skip(s string) int {
	if h.n == 0 || len(s) <= h.n || s[:h.n] != string(h.b[:h.n]) {
		return 0
	}
	return h.n
}

// set keeps head, or forgets the last one when head is empty or too long.
func (h *repeatedHead) set(head string) {
	if len(head) > maxRepeatedHead {
		head = ""
	}
	h.n = copy(h.b[:], head)
}

// clear forgets the head.
func (h *repeatedHead) clear() { h.n = 0 }
