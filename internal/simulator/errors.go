package simulator

import (
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error a request is answered with: the Go error that carries
// it to the code that writes it, and OpenAI's error object, whose fields the
// other formats' error shapes are rendered from (status and message; the
// type and code are OpenAI's own).
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.Type, e.Message) }

func strPtr(s string) *string { return &s }

func itoa(n int) string { return strconv.Itoa(n) }

func invalidRequest(status int, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error"}
	if param != "" {
		e.Param = strPtr(param)
	}
	if code != "" {
		e.Code = strPtr(code)
	}
	return e
}

// notFound is the answer to a path no format serves.
func notFound(method, path string) *apiError {
	return invalidRequest(http.StatusNotFound, "", "not_found", "Invalid URL (%s %s)", method, path)
}

// statusError is the error a real provider answers with status: the type and
// code OpenAI's SDKs key on for retries and error classes. Other formats
// take its message and derive their own type from the status.
func statusError(status int) *apiError {
	text := http.StatusText(status)
	if text == "" {
		text = "status " + strconv.Itoa(status)
	}
	e := &apiError{status: status, Message: "simulated " + text, Type: "invalid_request_error"}
	switch {
	case status == http.StatusTooManyRequests:
		e.Message = "Rate limit reached (simulated). Please try again later."
		e.Type, e.Code = "requests", strPtr("rate_limit_exceeded")
	case status == http.StatusUnauthorized:
		e.Code = strPtr("invalid_api_key")
	case status == http.StatusNotFound:
		e.Code = strPtr("not_found")
	case status >= 500:
		e.Message = "The server had an error while processing your request (simulated " + text + ")."
		e.Type = "server_error"
	}
	return e
}
