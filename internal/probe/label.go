package probe

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
)

// Header carries the probe token on every probe request. It is tokentap's
// own: the handler removes it before the request goes upstream, whatever
// its value.
const Header = "Tokentap-Probe"

// token is made once per process and never leaves it except in probe
// requests to the configured targets, which are tokentap's own routes: a
// label anyone could set would let a client hide its requests among the
// probes, or pass its own off as them.
var token = sync.OnceValue(func() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
})

// Token is the value of Header that marks a request as this process's
// probe.
func Token() string { return token() }

// Recognize reports whether v, a value of Header, is this process's
// token. It allocates nothing, so that the handler's hot path can call it,
// and compares in constant time, since the header comes from clients.
func Recognize(v string) bool {
	t := token()
	return len(v) == len(t) && constantTimeEqual(v, t)
}

// constantTimeEqual is subtle.ConstantTimeCompare for two strings of the
// same length, without converting them to byte slices (which could
// allocate).
func constantTimeEqual(a, b string) bool {
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return subtle.ConstantTimeByteEq(v, 0) == 1
}
