package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// maxErrorDetail bounds the part of an error body or transport error kept
// in a probe's error: it is logged, and an upstream may echo a request.
const maxErrorDetail = 200

// HTTPSender sends probes with package loadgen's client: the same
// streaming request and the same reading of the stream to its end as
// `tokentap load`, rather than a second client to keep in step with it.
type HTTPSender struct {
	client *http.Client
}

// NewHTTPSender returns a sender with its own connection pool: one idle
// connection per host is enough at one probe per target per second at
// most, and no compression is asked for, as a streaming client asks for
// none. It ignores HTTP_PROXY: a target is tokentap's own route, and a
// proxy in between would be measured with it.
//
// roots, when not nil, are the certificate authorities an HTTPS target's
// certificate is verified against, in place of the system's: a proxy
// serving its route with a certificate from its own CA (Caddy's
// `tls internal`) is probed with that CA trusted.
func NewHTTPSender(roots *x509.CertPool) *HTTPSender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 1
	tr.IdleConnTimeout = 2 * time.Minute
	tr.DisableCompression = true
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &HTTPSender{client: &http.Client{Transport: tr}}
}

// CloseIdleConnections closes the pool's idle connections.
func (s *HTTPSender) CloseIdleConnections() { s.client.CloseIdleConnections() }

// Send sends one probe of t and reads its stream to the end. The body is
// discarded: tokentap measured it on the way.
func (s *HTTPSender) Send(ctx context.Context, t *Target) error {
	timeout := t.Timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return context.DeadlineExceeded
	}
	var res *loadgen.Result
	_, err := loadgen.Run(ctx, loadgen.Config{
		URL:         t.URL,
		API:         loadgen.API(t.API),
		Models:      []string{t.Model},
		Concurrency: 1,
		Requests:    1,
		Timeout:     timeout,
		Prompts:     []string{t.Prompt},
		MaxTokens:   t.MaxTokens,
		Header:      t.Header,
		Client:      s.client,
		// Run waits for its requests, so res is set when it returns.
		OnResult: func(r *loadgen.Result) { res = r },
	})
	if err != nil {
		return err
	}
	if res == nil {
		return errors.New("the probe was not sent")
	}
	if res.OK() {
		return nil
	}
	return fmt.Errorf("%s: %s", res.ErrorKind, redact(res.Error, t.URL))
}

// redact cuts detail to maxErrorDetail bytes and takes out the URL's query
// and user information, should credentials have been put there: a
// transport error names the URL it failed on.
func redact(detail, raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.RawQuery != "" {
			detail = strings.ReplaceAll(detail, u.RawQuery, "REDACTED")
		}
		if u.User != nil {
			detail = strings.ReplaceAll(detail, u.User.String(), "REDACTED")
		}
	}
	if len(detail) > maxErrorDetail {
		detail = strings.ToValidUTF8(detail[:maxErrorDetail], "") + "…"
	}
	return detail
}
