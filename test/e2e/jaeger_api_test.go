package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// jaegerTraceTimeout is how long a span may take to become queryable: tokentap's
// batch delay (200 ms in the tests), Jaeger's batch processor (200 ms), and
// slack for a loaded machine.
const jaegerTraceTimeout = 30 * time.Second

// jaegerQuery reads traces back from Jaeger v2's query API (api_v3, HTTP
// JSON), as a user's tooling would.
type jaegerQuery struct {
	base   string // e.g. http://127.0.0.1:16686
	client *http.Client
}

func newJaegerQuery(addr string) *jaegerQuery {
	return &jaegerQuery{base: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}}
}

// errJaegerNotFound is Jaeger's 404, which the query API answers both for an
// unknown trace id and for a search without matches: "not yet", while
// spans are on their way.
var errJaegerNotFound = fmt.Errorf("jaeger: no traces found (HTTP 404)")

// get fetches path and decodes the api_v3 envelope {"result": TracesData}.
func (q *jaegerQuery) get(path string) ([]jaegerSpan, error) {
	res, err := q.client.Get(q.base + path)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusNotFound {
		return nil, errJaegerNotFound
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", path, res.StatusCode, body)
	}
	return parseJaegerTraces(body)
}

// trace is GET /api/v3/traces/{id}: every span of one trace.
func (q *jaegerQuery) trace(traceID string) ([]jaegerSpan, error) {
	return q.get("/api/v3/traces/" + url.PathEscape(traceID))
}

// search is GET /api/v3/traces with the snake_case query parameters that
// every Jaeger v2 release accepts. query.num_traces is required by the
// memory storage (without it: HTTP 500 "search depth must be greater than
// 0"), and the time range by the API itself.
func (q *jaegerQuery) search(service, operation string, from, to time.Time) ([]jaegerSpan, error) {
	v := url.Values{}
	v.Set("query.service_name", service)
	if operation != "" {
		v.Set("query.operation_name", operation)
	}
	v.Set("query.start_time_min", from.UTC().Format(time.RFC3339Nano))
	v.Set("query.start_time_max", to.UTC().Format(time.RFC3339Nano))
	v.Set("query.num_traces", "100")
	return q.get("/api/v3/traces?" + v.Encode())
}

// poll retries fetch until it returns spans that done accepts, treating
// 404 and unaccepted answers as "not yet", for up to jaegerTraceTimeout.
func pollJaeger(t *testing.T, what string, fetch func() ([]jaegerSpan, error), done func([]jaegerSpan) bool) []jaegerSpan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jaegerTraceTimeout)
	defer cancel()
	var last []jaegerSpan
	var lastErr error
	for {
		spans, err := fetch()
		if err == nil && done(spans) {
			return spans
		}
		if err != nil && err != errJaegerNotFound {
			lastErr = err
		} else if err == nil {
			last, lastErr = spans, nil
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not found in Jaeger within %v (last error: %v; last answer: %d spans %v)", what, jaegerTraceTimeout, lastErr, len(last), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// span is one span as Jaeger returns it, flattened for comparison.
// Attribute values are decoded to string, int64, float64, bool or []any.
type jaegerSpan struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int // OTLP SpanKind: 2 server, 3 client
	StatusCode                    int // OTLP StatusCode: 0 unset, 1 ok, 2 error
	StatusMessage                 string
	Scope                         string
	Attributes, Resource          map[string]any
}

func (s jaegerSpan) String() string {
	return fmt.Sprintf("%q (kind %d, span %s, parent %q, service.name=%v)", s.Name, s.Kind, s.SpanID, s.ParentSpanID, s.Resource["service.name"])
}

const (
	otlpKindServer = 2
	otlpKindClient = 3

	otlpStatusUnset = 0
	otlpStatusError = 2
)

// OTLP/JSON as Jaeger's api_v3 writes it: ids in hex, 64-bit integers as
// strings, enums as numbers.
type (
	otlpTracesData struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpKeyValue `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Scope struct {
						Name string `json:"name"`
					} `json:"scope"`
					Spans []struct {
						TraceID      string         `json:"traceId"`
						SpanID       string         `json:"spanId"`
						ParentSpanID string         `json:"parentSpanId"`
						Name         string         `json:"name"`
						Kind         int            `json:"kind"`
						Attributes   []otlpKeyValue `json:"attributes"`
						Status       struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"status"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string  `json:"stringValue"`
		IntValue    *string  `json:"intValue"`
		DoubleValue *float64 `json:"doubleValue"`
		BoolValue   *bool    `json:"boolValue"`
		ArrayValue  *struct {
			Values []otlpAnyValue `json:"values"`
		} `json:"arrayValue"`
	}
)

func parseJaegerTraces(body []byte) ([]jaegerSpan, error) {
	var td otlpTracesData
	if err := json.Unmarshal(body, &td); err != nil {
		return nil, fmt.Errorf("decoding Jaeger's answer: %v\n%s", err, body)
	}
	var out []jaegerSpan
	for _, rs := range td.Result.ResourceSpans {
		resource, err := otlpAttributeMap(rs.Resource.Attributes)
		if err != nil {
			return nil, err
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs, err := otlpAttributeMap(s.Attributes)
				if err != nil {
					return nil, err
				}
				out = append(out, jaegerSpan{
					TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID,
					Name: s.Name, Kind: s.Kind,
					StatusCode: s.Status.Code, StatusMessage: s.Status.Message,
					Scope: ss.Scope.Name, Attributes: attrs, Resource: resource,
				})
			}
		}
	}
	return out, nil
}

func otlpAttributeMap(kvs []otlpKeyValue) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.decode()
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %v", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}

func (v otlpAnyValue) decode() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.IntValue != nil:
		return strconv.ParseInt(*v.IntValue, 10, 64)
	case v.DoubleValue != nil:
		return *v.DoubleValue, nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.ArrayValue != nil:
		out := make([]any, 0, len(v.ArrayValue.Values))
		for _, e := range v.ArrayValue.Values {
			d, err := e.decode()
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}
	return nil, nil
}
