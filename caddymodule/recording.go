package caddymodule

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/DeRuina/timberjack"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/recording"
)

// Defaults of a recording's rotation.
const (
	DefaultRecordRollSize = 100 << 20
	DefaultRecordRollKeep = 10
)

// RecordConfig writes a recording of the traffic this handler measures:
// one JSON line per finished exchange (package recording), which
// `tokentap load --replay` replays against another model.
type RecordConfig struct {
	// Path is the file the lines are appended to. Handlers that name the
	// same file share one writer, across reloads too.
	Path string `json:"path"`
	// RollSize is the size at which the file is rotated, in bytes,
	// rounded up to whole MiB (the rotation's unit). Default: 100 MiB.
	RollSize int64 `json:"roll_size,omitempty"`
	// RollKeep is how many rotated files are kept besides the current
	// one; older ones are deleted. Default: 10.
	RollKeep int `json:"roll_keep,omitempty"`
}

// recorders holds one recording.Recorder per file, shared by the handlers
// that name it and kept while any of their configs or exchanges lives, so
// that a reload neither reopens the file nor loses a line in between.
var recorders = caddy.NewUsagePool()

// sharedRecorder is a recorders entry.
type sharedRecorder struct {
	*recording.Recorder
	cfg    RecordConfig
	logger *zap.Logger
}

// Destruct closes the file once the last handler using it is gone, and
// says what the recording lost, if anything.
func (s *sharedRecorder) Destruct() error {
	err := s.Close()
	if d, f := s.Dropped(), s.Failed(); d > 0 || f > 0 {
		s.logger.Warn("the recording lost lines", zap.String("file", s.cfg.Path),
			zap.Int64("written", s.Written()), zap.Int64("dropped", d), zap.Int64("failed", f))
	}
	return err
}

// provisionRecord opens the handler's recording, if it has one, and adds
// it to the sinks; the handler's lease gives it back.
func (h *Handler) provisionRecord() error {
	if h.Record == nil {
		return nil
	}
	cfg := *h.Record
	if cfg.Path == "" {
		return fmt.Errorf("record: a file is required")
	}
	if cfg.RollSize < 0 || cfg.RollKeep < 0 {
		return fmt.Errorf("record: roll_size and roll_keep must be at least 0")
	}
	if cfg.RollSize == 0 {
		cfg.RollSize = DefaultRecordRollSize
	}
	if cfg.RollKeep == 0 {
		cfg.RollKeep = DefaultRecordRollKeep
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return fmt.Errorf("record: %v", err)
	}
	cfg.Path = path
	logger := h.logger.Named("record")
	val, _, err := recorders.LoadOrNew(path, func() (caddy.Destructor, error) {
		w := &timberjack.Logger{
			Filename:   path,
			MaxSize:    int((cfg.RollSize + 1<<20 - 1) >> 20),
			MaxBackups: cfg.RollKeep,
			FileMode:   0o600,
		}
		// Open now, so that a file that cannot be written fails the
		// config instead of every line.
		if _, err := w.Write(nil); err != nil {
			return nil, fmt.Errorf("record %s: %v", path, err)
		}
		var mu sync.Mutex
		var last time.Time
		onError := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) > time.Minute {
				last = time.Now()
				logger.Error("writing the recording failed; lines are counted as lost until a write succeeds",
					zap.String("file", path), zap.Error(err))
			}
		}
		return &sharedRecorder{Recorder: recording.NewRecorder(w, onError), cfg: cfg, logger: logger}, nil
	})
	if err != nil {
		return err
	}
	shared := val.(*sharedRecorder)
	if shared.cfg != cfg {
		logger.Warn("another handler opened this recording with other rotation settings; its settings apply",
			zap.String("file", path), zap.Int64("roll_size", shared.cfg.RollSize), zap.Int("roll_keep", shared.cfg.RollKeep))
	}
	h.cfg.Sinks = append(h.cfg.Sinks, exchange.Named{Name: "record", Sink: shared.Recorder})
	release := h.cfg.Release
	h.cfg.Release = func() {
		_, _ = recorders.Delete(path)
		release()
	}
	return nil
}

// unmarshalRecord reads `record <file> [roll_size <size>] [roll_keep <n>]`.
func unmarshalRecord(d *caddyfile.Dispenser) (*RecordConfig, error) {
	c := &RecordConfig{}
	if !d.Args(&c.Path) {
		return nil, d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextArg() {
		key := d.Val()
		if seen[key] {
			return nil, d.Errf("record: %s given twice", key)
		}
		seen[key] = true
		var v string
		if !d.Args(&v) {
			return nil, d.Errf("record: %s needs a value", key)
		}
		switch key {
		case "roll_size":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				return nil, d.Errf("record: roll_size %q is not a size such as 50MiB", v)
			}
			c.RollSize = int64(n)
		case "roll_keep":
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil || n < 1 || fmt.Sprint(n) != v {
				return nil, d.Errf("record: roll_keep %q is not a whole number at least 1", v)
			}
			c.RollKeep = n
		default:
			return nil, d.Errf("record: unknown setting %q (roll_size, roll_keep)", key)
		}
	}
	return c, nil
}
