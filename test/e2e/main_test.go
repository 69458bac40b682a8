package e2e

import (
	"os"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestMain deletes the tokentap binary testbin.Build made, if a test had it
// built (TestSecretsNeverExported does without TOKENTAP_BINARY), once no
// test can use it any more.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.RemoveBuilt()
	os.Exit(code)
}
