package simulator

import "sync"

// load counts the requests in flight to each model, for the speed curve's
// batch slowdown. A model's entry goes when its last request does, so the
// map holds at most as many entries as requests in flight, whatever model
// names clients send.
type load struct {
	mu       sync.Mutex
	inflight map[string]int
}

// enter counts a request to model and returns the model's requests in
// flight, the request itself included.
func (l *load) enter(model string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight == nil {
		l.inflight = map[string]int{}
	}
	l.inflight[model]++
	return l.inflight[model]
}

// exit counts a request to model finished.
func (l *load) exit(model string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[model] <= 1 {
		delete(l.inflight, model)
		return
	}
	l.inflight[model]--
}
