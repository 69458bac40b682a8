package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/stats"
)

func init() {
	caddy.RegisterModule(HistoryApp{})
	httpcaddyfile.RegisterGlobalOption("tokentap_history", parseHistoryOption)
}

// DefaultHistoryInterval is the time between two saves of the history.
const DefaultHistoryInterval = time.Minute

// historyTimeout bounds one read or write of the history in storage.
const historyTimeout = 30 * time.Second

// HistoryApp is the tokentap_history app: it saves the process's live
// stats (every row's windows, in-flight view and slowdown baseline) at an
// interval and when the config stops, to Caddy's storage or a file, and
// restores them when the process starts, so that a restart or a deploy
// does not empty the comparison. It is opt-in: the history holds label
// values and is written every interval.
//
// The live stats outlive config reloads already, so the history is read
// once per process, at the first provisioning, and only into live stats
// that are still empty. A history that is missing makes tokentap start
// fresh silently; one that is too old, damaged, of another version or too
// large is logged once with the reason and counted
// (tokentap.stats.restore), and tokentap starts fresh: it never fails to
// start for it.
type HistoryApp struct {
	// File is a file to keep the history in, instead of Caddy's storage:
	// written whole to a temporary file beside it, then renamed over it,
	// so that a crash mid-write leaves the previous one. Default: Caddy's
	// storage, under the key tokentap/stats/<name>.snapshot.
	File string `json:"file,omitempty"`
	// Name names this instance's history: its key in Caddy's storage,
	// which instances of a cluster may share, and in the log; with File,
	// in the log only. Letters, digits, '.', '_' and '-'. Default: Caddy's
	// instance ID, kept in its data directory.
	Name string `json:"name,omitempty"`
	// Interval is the time between two saves, at least 1s; the config's
	// stop (a reload or the process's exit) saves too. Default: 1m.
	Interval caddy.Duration `json:"interval,omitempty"`

	logger *zap.Logger
	place  historyPlace
	stop   chan struct{}
	done   chan struct{}
}

// history is the process's history state, shared by the apps of
// successive configs.
var history struct {
	// mu serialises saves, and the restore.
	mu sync.Mutex
	// restored is set once the process has tried to restore.
	restored bool
	// failing is set while saves fail, so that a failing place logs once.
	failing bool
}

// historyName is what Name may be: it becomes part of a storage key.
var historyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// CaddyModule returns the Caddy module information.
func (HistoryApp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tokentap_history",
		New: func() caddy.Module { return new(HistoryApp) },
	}
}

// Provision resolves where the history goes and, at the process's first
// provisioning, restores it.
func (a *HistoryApp) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if a.Interval == 0 {
		a.Interval = caddy.Duration(DefaultHistoryInterval)
	}
	if time.Duration(a.Interval) < time.Second {
		return fmt.Errorf("interval %v: at least 1s", time.Duration(a.Interval))
	}
	name := a.Name
	if name == "" {
		id, err := caddy.InstanceID()
		if err != nil {
			return fmt.Errorf("naming the history after Caddy's instance ID: %v (set name)", err)
		}
		name = id.String()
	}
	if !historyName.MatchString(name) {
		return fmt.Errorf("name %q: use 1 to 128 letters, digits, '.', '_' and '-'", name)
	}
	a.logger = a.logger.With(zap.String("name", name))
	if a.File != "" {
		a.place = fileHistory{path: a.File}
	} else {
		a.place = storageHistory{storage: ctx.Storage(), key: "tokentap/stats/" + name + ".snapshot"}
	}
	a.restore(liveStats, time.Now())
	return nil
}

// restore reads the history into store, once per process and only while
// store is empty, logging and counting what came of it.
func (a *HistoryApp) restore(store *stats.Store, now time.Time) {
	history.mu.Lock()
	defer history.mu.Unlock()
	if history.restored {
		return
	}
	history.restored = true
	if !store.Empty() {
		a.logger.Info("live stats history not restored: the live stats have data already", zap.String("from", a.place.String()))
		return
	}
	result, rows, err := readHistory(a.place, store, now)
	otelexport.CountHistoryRestore(result)
	switch result {
	case otelexport.HistoryRestored:
		a.logger.Info("live stats history restored", zap.String("from", a.place.String()), zap.Int("rows", rows))
	case otelexport.HistoryMissing:
		a.logger.Debug("no live stats history: starting fresh", zap.String("from", a.place.String()))
	default:
		a.logger.Warn("live stats history not restored: starting fresh",
			zap.String("from", a.place.String()), zap.String("reason", result), zap.Error(err))
	}
}

// readHistory reads the history from place into store and returns the
// result as tokentap.stats.restore counts it.
func readHistory(place historyPlace, store *stats.Store, now time.Time) (result string, rows int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
	defer cancel()
	limit := stats.MaxHistorySize(stats.DefaultMaxRows)
	b, err := place.load(ctx, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return otelexport.HistoryMissing, 0, nil
	case errors.Is(err, errHistoryTooLarge):
		return otelexport.HistoryTooLarge, 0, err
	case err != nil:
		return otelexport.HistoryReadFailed, 0, err
	}
	rows, err = store.RestoreHistory(b, now)
	var he *stats.HistoryError
	switch {
	case err == nil:
		return otelexport.HistoryRestored, rows, nil
	case errors.As(err, &he):
		return he.Reason, 0, err
	}
	return otelexport.HistoryCorrupt, 0, err
}

// Start saves the history every interval until Stop.
func (a *HistoryApp) Start() error {
	a.stop, a.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(a.done)
		tick := time.NewTicker(time.Duration(a.Interval))
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
				a.save()
			}
		}
	}()
	a.logger.Info("saving the live stats history", zap.String("to", a.place.String()), zap.Duration("interval", time.Duration(a.Interval)))
	return nil
}

// Stop ends the periodic saves and saves once more: at a reload the next
// config's app carries on, at the process's exit this is the last.
func (a *HistoryApp) Stop() error {
	if a.stop != nil {
		close(a.stop)
		<-a.done
		a.stop = nil
	}
	a.save()
	return nil
}

// save writes the live stats' history, counting the result; a failure is
// logged when saves start failing and when they recover, not every time.
func (a *HistoryApp) save() {
	history.mu.Lock()
	defer history.mu.Unlock()
	err := writeHistory(a.place, liveStats, time.Now())
	if err != nil {
		otelexport.CountHistorySave(otelexport.HistorySaveFailed)
		if !history.failing {
			a.logger.Error("saving the live stats history", zap.String("to", a.place.String()), zap.Error(err))
		}
		history.failing = true
		return
	}
	otelexport.CountHistorySave(otelexport.HistorySaved)
	if history.failing {
		a.logger.Info("saving the live stats history again", zap.String("to", a.place.String()))
	}
	history.failing = false
}

func writeHistory(place historyPlace, store *stats.Store, now time.Time) error {
	b, err := store.MarshalHistory(now)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
	defer cancel()
	return place.save(ctx, b)
}

// historyPlace is where the history is kept.
type historyPlace interface {
	// load reads the history, refusing one longer than limit with
	// errHistoryTooLarge; a missing one is fs.ErrNotExist.
	load(ctx context.Context, limit int64) ([]byte, error)
	// save replaces the history whole.
	save(ctx context.Context, b []byte) error
	String() string
}

var errHistoryTooLarge = errors.New("history too large")

// storageHistory keeps the history in Caddy's storage, under key.
type storageHistory struct {
	storage certmagic.Storage
	key     string
}

func (p storageHistory) load(ctx context.Context, limit int64) ([]byte, error) {
	info, err := p.storage.Stat(ctx, p.key)
	if err != nil {
		return nil, err
	}
	if info.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errHistoryTooLarge, info.Size, limit)
	}
	b, err := p.storage.Load(ctx, p.key)
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errHistoryTooLarge, len(b), limit)
	}
	return b, err
}

func (p storageHistory) save(ctx context.Context, b []byte) error {
	return p.storage.Store(ctx, p.key, b)
}

func (p storageHistory) String() string { return "storage:" + p.key }

// fileHistory keeps the history in a file of its own.
type fileHistory struct{ path string }

func (p fileHistory) load(_ context.Context, limit int64) ([]byte, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errHistoryTooLarge, info.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errHistoryTooLarge, limit)
	}
	return b, err
}

// save writes b to a temporary file in the same directory, syncs it and
// renames it over the history, so that a reader or a crash sees the old
// history or the new, never part of one.
func (p fileHistory) save(_ context.Context, b []byte) error {
	dir := filepath.Dir(p.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p.path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p.path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

func (p fileHistory) String() string { return "file:" + p.path }

// parseHistoryOption reads the tokentap_history global option:
//
//	{
//		tokentap_history {
//			file     <path>
//			name     <name>
//			interval <duration>
//		}
//	}
//
// The block may be left out: tokentap_history alone keeps the history in
// Caddy's storage every minute.
func parseHistoryOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("tokentap_history already specified")
	}
	app := new(HistoryApp)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "tokentap_history", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the global option's tokens (see
// parseHistoryOption).
func (a *HistoryApp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option's name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		opt := d.Val()
		if seen[opt] {
			return d.Errf("%s already specified", opt)
		}
		seen[opt] = true
		var arg string
		if !d.Args(&arg) || d.NextArg() {
			return d.Errf("%s wants one value", opt)
		}
		switch opt {
		case "file":
			a.File = arg
		case "name":
			if !historyName.MatchString(arg) {
				return d.Errf("name %q: use 1 to 128 letters, digits, '.', '_' and '-'", arg)
			}
			a.Name = arg
		case "interval":
			dur, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("parsing interval: %v", err)
			}
			if dur < time.Second {
				return d.Errf("interval %v: at least 1s", dur)
			}
			a.Interval = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized tokentap_history option '%s'", opt)
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.App             = (*HistoryApp)(nil)
	_ caddy.Provisioner     = (*HistoryApp)(nil)
	_ caddyfile.Unmarshaler = (*HistoryApp)(nil)
)
