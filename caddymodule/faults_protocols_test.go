package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
)

// protocolsSite serves the simulator behind tokentap over plain HTTP (h1
// and h2c) and over TLS (h1 and h2) with a certificate the test made, and
// the fault upstream for the upload and upgrade tests.
const protocolsSite = `
http://` + faultsProxyAddr + ` {
	bind 127.0.0.1
	handle_path /sim/* {
		tokentap
		reverse_proxy ` + faultsSimAddr + `
	}
	handle_path /up/* {
		tokentap
		reverse_proxy ` + faultsUpstreamAddr + `
	}
}

https://` + faultsTLSAddr + ` {
	bind 127.0.0.1
	tls CERTFILE KEYFILE
	handle_path /sim/* {
		tokentap
		reverse_proxy ` + faultsSimAddr + `
	}
}

http://` + faultsSimAddr + ` {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 500
		output_tokens 25
	}
}
`

// startProtocolsCaddy writes a certificate for 127.0.0.1 and loads
// protocolsSite; it returns the pool that trusts the certificate.
func startProtocolsCaddy(t *testing.T) (*faultsCaddy, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, pool := selfSignedCert(t)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	site := strings.NewReplacer("CERTFILE", certFile, "KEYFILE", keyFile).Replace(protocolsSite)
	return startFaultsCaddy(t, site), pool
}

func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "tokentap fault tests"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), pool
}

// TestProtocols: a stream through tokentap over HTTP/1.1, h2c and HTTP/2
// over TLS arrives byte for byte as the simulator sends it straight to a
// client, and is measured the same way.
func TestProtocols(t *testing.T) {
	sink := startFaultsExport(t)
	startFaultsUpstream(t)
	_, pool := startProtocolsCaddy(t)

	h1 := new(http.Protocols)
	h1.SetHTTP1(true)
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	h2 := new(http.Protocols)
	h2.SetHTTP2(true)
	tests := []struct {
		name      string
		base      string
		protocols *http.Protocols
		wantProto string
		wantTLS   bool
	}{
		{"HTTP/1.1", faultsProxyURL, h1, "HTTP/1.1", false},
		{"h2c (HTTP/2 without TLS, prior knowledge)", faultsProxyURL, h2c, "HTTP/2.0", false},
		{"HTTP/2 over TLS", "https://" + faultsTLSAddr, h2, "HTTP/2.0", true},
		{"HTTP/1.1 over TLS", "https://" + faultsTLSAddr, h1, "HTTP/1.1", true},
	}
	body := `{"model":"sim-proto","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"protocols"}]}`
	direct := faultsClient()
	defer direct.CloseIdleConnections()
	resp, err := direct.Post(faultsSimURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("straight from the simulator: %d, %v", resp.StatusCode, err)
	}
	// The simulator's answer to this request is the same every time:
	// docs/RELIABILITY.md quotes its size and its 25 tokens.
	if len(want) != 7370 {
		t.Errorf("the simulator sends %d bytes for this request; docs/RELIABILITY.md says 7,370", len(want))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &http.Transport{DisableCompression: true, Protocols: tt.protocols, TLSClientConfig: &tls.Config{RootCAs: pool}}
			defer tr.CloseIdleConnections()
			tc := newTraceContext(t)
			req, _ := http.NewRequest("POST", tt.base+"/sim/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", tc.header)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.Proto != tt.wantProto || (resp.TLS != nil) != tt.wantTLS {
				t.Errorf("protocol %s, TLS %v; want %s, TLS %v", resp.Proto, resp.TLS != nil, tt.wantProto, tt.wantTLS)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("client got %d bytes (sha256 %x), the simulator sends %d (sha256 %x)", len(got), sha256Of(got)[:6], len(want), sha256Of(want)[:6])
			}
			n, _ := strconv.Atoi(resp.Trailer.Get(simulator.HeaderOutputTokens))
			a := waitSpan(t, sink, tc, 10*time.Second).Attributes
			if a["tokentap.outcome"] != "completed" || a["gen_ai.usage.output_tokens"] != int64(n) || n != 25 {
				t.Errorf("span: outcome %v, output tokens %v; the simulator sent %d", a["tokentap.outcome"], a["gen_ai.usage.output_tokens"], n)
			}
			t.Logf("%s: %d bytes identical to the simulator's (sha256 %x), trailers %v; span: outcome %v, %v output tokens, %v tokens/s",
				resp.Proto, len(got), sha256Of(got)[:6], resp.Trailer.Get(simulator.HeaderOutputTokens) != "",
				a["tokentap.outcome"], a["gen_ai.usage.output_tokens"], a["tokentap.output_tokens_per_second"])
		})
	}
}

// TestExpectContinue: a client that sends Expect: 100-continue gets its
// 100 Continue, the upstream gets the whole upload, and tokentap reads the
// model from it.
func TestExpectContinue(t *testing.T) {
	sink := startFaultsExport(t)
	up := startFaultsUpstream(t)
	startProtocolsCaddy(t)
	received := make(chan [32]byte, 1)
	up.handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		sum, _, err := readHash(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		received <- sum
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(chatStream("gpt-upload", 4))
	})
	upload := []byte(`{"model":"gpt-upload","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("a long document ", 1<<16) + `"}]}`)
	tc := newTraceContext(t)
	var got100 time.Duration
	start := time.Now()
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got100Continue: func() { got100 = time.Since(start) },
	})
	req, _ := http.NewRequestWithContext(ctx, "POST", faultsProxyURL+"/up/v1/chat/completions", bytes.NewReader(upload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("traceparent", tc.header)
	// The client waits up to 10 s for the 100 before sending the body
	// anyway, so a missing 100 shows as a slow request, not a pass.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, ExpectContinueTimeout: 10 * time.Second}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got100 == 0 || got100 > 5*time.Second {
		t.Errorf("100 Continue after %v (0: never)", got100)
	}
	select {
	case sum := <-received:
		if sum != sha256.Sum256(upload) {
			t.Errorf("the upstream got an upload with sha256 %x, the client sent %x", sum[:6], sha256Of(upload)[:6])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never got the upload")
	}
	a := waitSpan(t, sink, tc, 10*time.Second).Attributes
	if a["gen_ai.request.model"] != "gpt-upload" || a["tokentap.outcome"] != "completed" {
		t.Errorf("span: request model %v, outcome %v", a["gen_ai.request.model"], a["tokentap.outcome"])
	}
	t.Logf("100 Continue after %v; the upstream got all %d KiB (sha256 %x); span: request model %v, outcome %v, output tokens %v",
		got100.Round(time.Microsecond), len(upload)>>10, sha256Of(upload)[:6], a["gen_ai.request.model"], a["tokentap.outcome"], a["gen_ai.usage.output_tokens"])
}

// TestUpgradesPassThrough: a WebSocket and another upgrade, through real
// Caddy and reverse_proxy, reach the upstream with their headers untouched
// (tokentap injects no traceparent), carry bytes both ways unchanged, and
// produce no span.
func TestUpgradesPassThrough(t *testing.T) {
	sink := startFaultsExport(t)
	up := startFaultsUpstream(t)
	startProtocolsCaddy(t)
	tests := []struct {
		name     string
		protocol string
		// exchange sends messages over the upgraded connection and
		// checks what comes back.
		exchange func(t *testing.T, rw *bufio.ReadWriter) int
	}{
		{"WebSocket", "websocket", exchangeWebSocket},
		{"another protocol", "tokentap-test/1", exchangeRaw},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("/upgrade%d", i)
			sawTraceparent := make(chan string, 1)
			up.handle(path, func(w http.ResponseWriter, r *http.Request) {
				sawTraceparent <- r.Header.Get("traceparent")
				if !strings.EqualFold(r.Header.Get("Upgrade"), tt.protocol) {
					http.Error(w, "upgrade to "+r.Header.Get("Upgrade"), http.StatusBadRequest)
					return
				}
				conn, rw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				accept := ""
				if tt.protocol == "websocket" {
					accept = "Sec-WebSocket-Accept: " + webSocketAccept(r.Header.Get("Sec-WebSocket-Key")) + "\r\n"
				}
				_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + tt.protocol + "\r\n" + accept + "\r\n")
				_ = rw.Flush()
				if tt.protocol == "websocket" {
					echoWebSocket(rw)
				} else {
					_, _ = io.Copy(conn, rw)
				}
			})
			tc := newTraceContext(t)
			conn, err := net.Dial("tcp", faultsProxyAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			key := base64.StdEncoding.EncodeToString([]byte("tokentap-faults!"))
			fmt.Fprintf(conn, "GET /up%s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n"+
				"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\ntraceparent: %s\r\n\r\n",
				path, faultsProxyAddr, tt.protocol, key, tc.header)
			rw := bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn))
			resp, err := http.ReadResponse(rw.Reader, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if tt.protocol == "websocket" && resp.Header.Get("Sec-WebSocket-Accept") != webSocketAccept(key) {
				t.Errorf("Sec-WebSocket-Accept %q", resp.Header.Get("Sec-WebSocket-Accept"))
			}
			if got := <-sawTraceparent; got != tc.header {
				t.Errorf("the upstream got traceparent %q, the client sent %q: an upgrade must pass untouched", got, tc.header)
			}
			moved := tt.exchange(t, rw)
			conn.Close()

			// A measured request after it: once its span has arrived,
			// an upgrade's span, had there been one, would have too.
			after := newTraceContext(t)
			req, _ := http.NewRequest("POST", faultsProxyURL+"/sim/v1/chat/completions", strings.NewReader(`{"model":"after-upgrade","stream":true}`))
			req.Header.Set("traceparent", after.header)
			r2, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, r2.Body)
			r2.Body.Close()
			waitSpan(t, sink, after, 10*time.Second)
			for _, s := range sink.Spans() {
				if s.TraceID == tc.traceID {
					t.Errorf("the upgrade produced a span: %s", s)
				}
			}
			t.Logf("101 through Caddy, traceparent untouched, %d bytes echoed both ways unchanged, no span", moved)
		})
	}
}

// exchangeWebSocket sends masked text and binary frames, as a browser
// does, and reads the upstream's unmasked echoes.
func exchangeWebSocket(t *testing.T, rw *bufio.ReadWriter) int {
	t.Helper()
	moved := 0
	for _, m := range []struct {
		opcode  byte
		payload []byte
	}{
		{1, []byte("hello through tokentap")},
		{2, bytes.Repeat([]byte{0, 1, 2, 0xff, '\n', '\n'}, 50000)},
	} {
		writeWSFrame(rw.Writer, m.opcode, m.payload, true)
		if err := rw.Flush(); err != nil {
			t.Fatal(err)
		}
		op, payload, err := readWSFrame(rw.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if op != m.opcode || !bytes.Equal(payload, m.payload) {
			t.Errorf("echo: opcode %d, %d bytes; sent opcode %d, %d bytes", op, len(payload), m.opcode, len(m.payload))
		}
		moved += 2 * len(m.payload)
	}
	return moved
}

// exchangeRaw sends bytes that look like HTTP and SSE, to be sure nothing
// reads them, and reads the echo.
func exchangeRaw(t *testing.T, rw *bufio.ReadWriter) int {
	t.Helper()
	msg := bytes.Repeat([]byte("data: {\"model\":\"not-measured\"}\n\nPOST / HTTP/1.1\r\n\r\n\x00\xff"), 20000)
	go func() {
		_, _ = rw.Write(msg)
		_ = rw.Flush()
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(rw, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Error("the echo differs from what was sent")
	}
	return 2 * len(msg)
}

func webSocketAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// writeWSFrame writes one final WebSocket frame (RFC 6455 section 5.2).
func writeWSFrame(w *bufio.Writer, opcode byte, payload []byte, masked bool) {
	_ = w.WriteByte(0x80 | opcode)
	var maskBit byte
	if masked {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		_ = w.WriteByte(maskBit | byte(n))
	case n < 1<<16:
		_ = w.WriteByte(maskBit | 126)
		_ = binary.Write(w, binary.BigEndian, uint16(n))
	default:
		_ = w.WriteByte(maskBit | 127)
		_ = binary.Write(w, binary.BigEndian, uint64(n))
	}
	if !masked {
		_, _ = w.Write(payload)
		return
	}
	mask := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	_, _ = w.Write(mask[:])
	out := make([]byte, len(payload))
	for i, b := range payload {
		out[i] = b ^ mask[i%4]
	}
	_, _ = w.Write(out)
}

// readWSFrame reads one WebSocket frame and unmasks its payload.
func readWSFrame(r *bufio.Reader) (opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l uint16
		err = binary.Read(r, binary.BigEndian, &l)
		n = uint64(l)
	case 127:
		err = binary.Read(r, binary.BigEndian, &n)
	}
	if err != nil {
		return 0, nil, err
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return h[0] & 0x0f, payload, nil
}

// echoWebSocket answers every frame with the same payload, unmasked as a
// server's frames are, until the connection closes.
func echoWebSocket(rw *bufio.ReadWriter) {
	for {
		op, payload, err := readWSFrame(rw.Reader)
		if err != nil {
			return
		}
		writeWSFrame(rw.Writer, op, payload, false)
		if rw.Flush() != nil {
			return
		}
	}
}
