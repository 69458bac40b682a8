package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// The OTLP sink runs as its own process (this program's `sink`
// subcommand), not in the client: receiving and decoding spans costs CPU,
// and in the client it would slow the reading of the very streams whose
// delays are measured, on the tokentap path only. A collector is another
// process in production too.

// sinkSpan is what the benchmark needs of one of tokentap's spans.
type sinkSpan struct {
	ResponseID string   `json:"id"`
	TTFT       *float64 `json:"ttft,omitempty"` // tokentap.time_to_first_token, seconds
	Rate       *float64 `json:"rate,omitempty"` // tokentap.output_tokens_per_second
}

// runSink is the sink subcommand: it receives OTLP on --listen until
// SIGTERM, then writes one JSON line per span to --out and exits.
func runSink(args []string) error {
	fs := flag.NewFlagSet("overhead sink", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9359", "the OTLP/gRPC address")
	out := fs.String("out", "", "where to write the spans at exit (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("sink: --out is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := otlpsink.Start(*listen)
	if err != nil {
		return err
	}
	<-ctx.Done()
	// Close waits for exports in progress, so the last batch that
	// tokentap flushed at its shutdown is in.
	s.Close()
	return writeSpans(*out, s.Spans())
}

func writeSpans(path string, spans []otlpsink.Span) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, sp := range spans {
		id, _ := sp.Attributes["gen_ai.response.id"].(string)
		if id == "" {
			continue
		}
		line := sinkSpan{ResponseID: id}
		if v, ok := sp.Attributes["tokentap.time_to_first_token"].(float64); ok {
			line.TTFT = &v
		}
		if v, ok := sp.Attributes["tokentap.output_tokens_per_second"].(float64); ok {
			line.Rate = &v
		}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readSpans reads what the sink process wrote.
func readSpans(path string) ([]sinkSpan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var spans []sinkSpan
	dec := json.NewDecoder(f)
	for {
		var sp sinkSpan
		if err := dec.Decode(&sp); err != nil {
			if errors.Is(err, io.EOF) {
				return spans, nil
			}
			return spans, fmt.Errorf("%s: %w", path, err)
		}
		spans = append(spans, sp)
	}
}

// waitTCP waits until addr accepts connections: the sink speaks gRPC, not
// plain HTTP.
func waitTCP(ctx context.Context, p *process, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it listened on %s (%v); its log:\n%s", p.name, addr, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen on %s within %v; its log:\n%s", p.name, addr, readyTimeout, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
