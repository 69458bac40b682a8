package testbin

import (
	"net"
	"testing"
	"time"
)

// FreeAddr is a loopback address whose port was free at the time of the
// call, for a process the test starts and tells where to listen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RequireFree fails the test at once if one of addrs (host:port) cannot be
// bound: the process under test would then fail to bind it, or worse, the
// test would talk to whatever holds it (Caddy listens with SO_REUSEPORT,
// so a second tokentap would even share the port).
func RequireFree(t testing.TB, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is in use (%v): stop whatever listens there (see `ss -ltnp`), "+
				"e.g. a tokentap, Caddy or Jaeger left running by an earlier run", addr, err)
		}
		ln.Close()
	}
}

// WaitFree waits up to timeout until every one of addrs can be bound
// again, and reports those still held: a test must not leave its
// processes running. The kernel closes a process's listeners with it, but
// the exit itself takes a moment.
func WaitFree(t testing.TB, timeout time.Duration, addrs ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, addr := range addrs {
		for {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				ln.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s is still bound %v after the test's processes were stopped: %v", addr, timeout, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
