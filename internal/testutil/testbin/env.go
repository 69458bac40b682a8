package testbin

import (
	"os"
	"slices"
	"strings"
)

// Environ is the test process's environment without the variables whose
// names start with one of prefixes. A process under test gets it: the
// caller's OTEL_* (a traces endpoint, a sampler, OTEL_SDK_DISABLED) or an
// SDK's own variables (a base URL, custom headers) would change what the
// test measures behind its back.
func Environ(prefixes ...string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	})
}
