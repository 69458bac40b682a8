package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// testdata reads fixture name of one dialect's folder under testdata: every
// dialect's tests and benchmarks read their fixtures the same way.
func testdata(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchange is how a test serves a response to a dialect: its status, its
// media type and the request path. An empty path sends no request, as for a
// tap that saw only the response.
type exchange struct {
	status      int
	contentType string
	path        string
}

// init sets mt up for x on d, with req as the request body, so tests (with
// start) and benchmarks (on a reused Meter) begin an exchange alike.
func (x exchange) init(mt *Meter, d Dialect, opts Options, req []byte) {
	mt.Init(d, opts, t0)
	if x.path != "" {
		mt.Request(x.path, req, false)
	}
	mt.Response(x.status, x.contentType, "")
}

// start is a new Meter set up for x on d, with req as the request body.
func (x exchange) start(d Dialect, opts Options, req []byte) *Meter {
	mt := new(Meter)
	x.init(mt, d, opts, req)
	return mt
}

// replayPieces feeds a stream piece by piece (each an event, NDJSON line or
// message), the i-th at at(i), and finishes one step after the last, so the
// times a test expects are event indexes.
func replayPieces(mt *Meter, pieces [][]byte) *Measurement {
	for i, p := range pieces {
		mt.Write(p, t0.Add(at(i)))
	}
	return mt.Finish(t0.Add(at(len(pieces))), OutcomeUnknown, "")
}

// readInPieces feeds a body in n-byte writes, all one step in, and finishes
// a step later: a body arrives in pieces like any other.
func readInPieces(mt *Meter, body []byte, n int) *Measurement {
	for i := 0; i < len(body); i += n {
		mt.Write(body[i:min(i+n, len(body))], t0.Add(step))
	}
	return mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
}

// dialectCase is one row of a dialect's table of fixtures: the fixture, how
// it is served where a table's rows differ in that, and what its
// measurement must be. One type serves every dialect so that one check
// (checkStream, checkBody) reads every table.
type dialectCase struct {
	name    string
	fixture string
	// path, status and contentType serve the fixture, in the tables whose
	// rows differ in them.
	path        string
	status      int
	contentType string

	// firstToken, firstVisible, lastToken are the indexes of the events
	// that arrived at those times in a replay, -1 for none; firstChunk is
	// the first event that is not a comment.
	firstToken, firstVisible, lastToken, firstChunk int
	chunks                                          int64
	usage                                           Usage
	// billed is the billed counts (Measurement.Billed), nil for none
	// reported: -1 each, which every row of every other dialect checks.
	billed    *BilledUsage
	model, id string
	finish    []string
	outcome   Outcome
	errorType string
	timings   []ServerTiming
	// degraded is the reason of the one fault the measurement counts, ""
	// for none.
	degraded string

	// outputEvents and estimated are not read by checkStream or checkBody:
	// only the tables that hold them (Anthropic's and the Responses API's
	// streams, Gemini's bodies) check them, each in its own loop.
	outputEvents int64
	estimated    int64
	// streamed is StreamedOutputTokens, checked by checkRecorded where a
	// case gives it: the output less the reasoning usage reports when none
	// was streamed, written by hand from the payload.
	streamed int64
}

// checkStream checks the measurement of a stream fed by replayPieces: the
// times of its events, its chunks, and what checkResult checks.
func checkStream(t *testing.T, m *Measurement, want dialectCase) {
	t.Helper()
	checkEventTime(t, "FirstByte", m.FirstByte, 0)
	checkEventTime(t, "FirstChunk", m.FirstChunk, want.firstChunk)
	checkEventTime(t, "FirstToken", m.FirstToken, want.firstToken)
	checkEventTime(t, "FirstVisibleToken", m.FirstVisibleToken, want.firstVisible)
	checkEventTime(t, "LastToken", m.LastToken, want.lastToken)
	if m.Chunks != want.chunks || !m.Streamed {
		t.Errorf("Chunks = %d Streamed %v, want %d true", m.Chunks, m.Streamed, want.chunks)
	}
	checkResult(t, m, want)
}

// checkBody checks the measurement of a response read whole: it has no
// token times and no chunks, and checkResult's fields are exact.
func checkBody(t *testing.T, m *Measurement, want dialectCase) {
	t.Helper()
	if m.FirstToken != 0 || m.Streamed || m.Chunks != 0 {
		t.Errorf("a body has no token times: FirstToken %v Streamed %v Chunks %d", m.FirstToken, m.Streamed, m.Chunks)
	}
	checkResult(t, m, want)
}

// checkEventTime checks that a measured time is the arrival time of event
// idx of a replay (see at), or zero when idx is -1.
func checkEventTime(t *testing.T, what string, got time.Duration, idx int) {
	t.Helper()
	want := time.Duration(0)
	if idx >= 0 {
		want = at(idx)
	}
	if got != want {
		t.Errorf("%s = %v, want %v (event %d)", what, got, want, idx)
	}
}

// checkResult checks what every dialect's tests expect beyond times:
// usage, response model and id, finish reasons, outcome, server timings
// and faults, each exactly (an empty want is a check for empty).
func checkResult(t *testing.T, m *Measurement, want dialectCase) {
	t.Helper()
	if m.Usage != want.usage {
		t.Errorf("Usage = %+v, want %+v", m.Usage, want.usage)
	}
	wantBilled := unknownBilled
	if want.billed != nil {
		wantBilled = *want.billed
	}
	if m.Billed != wantBilled {
		t.Errorf("Billed = %+v, want %+v", m.Billed, wantBilled)
	}
	if m.ResponseModel != want.model || m.ResponseID != want.id {
		t.Errorf("model, id = %q, %q; want %q, %q", m.ResponseModel, m.ResponseID, want.model, want.id)
	}
	if !reflect.DeepEqual(m.FinishReasons, want.finish) {
		t.Errorf("FinishReasons = %q, want %q", m.FinishReasons, want.finish)
	}
	if m.Outcome != want.outcome || m.ErrorType != want.errorType {
		t.Errorf("outcome = %v %q, want %v %q", m.Outcome, m.ErrorType, want.outcome, want.errorType)
	}
	if !reflect.DeepEqual(m.ServerTimings, want.timings) {
		t.Errorf("ServerTimings = %v, want %v", m.ServerTimings, want.timings)
	}
	// A fault is counted once, however much follows it.
	wantFaults := int64(0)
	if want.degraded != "" {
		wantFaults = 1
	}
	if m.DegradedReason != want.degraded || m.Degraded != wantFaults {
		t.Errorf("Degraded = %d %q, want %d %q", m.Degraded, m.DegradedReason, wantFaults, want.degraded)
	}
}

// requestCase is one row of a dialect's table of request bodies: what the
// dialect reads from the body on its usual path.
type requestCase struct {
	name string
	body string
	want Request
}

// checkRequests reads each row's body on path with a new dialect and
// checks the parameters it found, one subtest a row.
func checkRequests(t *testing.T, newDialect func() Dialect, path string, tests []requestCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			newDialect().Request(&r, path, []byte(tt.body))
			if !reflect.DeepEqual(r, tt.want) {
				t.Errorf("got %+v, want %+v", r, tt.want)
			}
		})
	}
}
