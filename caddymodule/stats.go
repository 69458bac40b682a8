package caddymodule

import (
	"github.com/tokentap/tokentap/stats"
)

// liveStats is the process's live stats. It is process-wide, like the
// TracerProvider, and outlives config reloads: a reload must not empty the
// comparison, and the admin API that serves it (adminapi.go) is rebuilt on
// every config load too.
var liveStats = stats.NewStore(stats.Options{})
