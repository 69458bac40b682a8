package caddymodule

import (
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/live"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/stats"
)

// liveStats is the process's live stats. It is process-wide, like the
// TracerProvider, and outlives config reloads: a reload must not empty the
// comparison, and the admin API that serves it (adminapi.go) is rebuilt on
// every config load too. The tokentap_history app (history.go) carries it
// across restarts.
var liveStats = stats.NewStore(stats.Options{OnHealth: healthChanged})

// liveStreams is the process's requests in flight, process-wide for the
// same reason: a reload starts new handlers while the old ones' streams run
// on, and both are the present.
var liveStreams live.Table

// liveRows is liveStreams at now, as the stats views carry it.
func liveRows(now time.Time) []stats.LiveRow {
	var rows []stats.LiveRow
	liveStreams.Counts(now, func(c live.Count) {
		rows = append(rows, stats.LiveRow{Provider: c.Provider, Model: c.Model,
			InFlight: c.InFlight, Waiting: c.Waiting, Receiving: c.Receiving, Stalled: c.Stalled})
	})
	return rows
}

// healthInstruments are the instruments of the current MeterProvider, for
// counting health changes; set at provisioning.
var healthInstruments atomic.Pointer[otelexport.Instruments]

func init() {
	otelexport.SetActiveSource(func(yield func(otelexport.ActiveRow)) {
		liveStreams.Counts(time.Now(), func(c live.Count) {
			yield(otelexport.ActiveRow{Provider: c.Provider, Model: c.Model, Waiting: c.Waiting, Receiving: c.Receiving, Stalled: c.Stalled})
		})
	})
	otelexport.SetHealthSource(func(yield func(otelexport.HealthRow)) {
		liveStats.EachHealth(func(k stats.Key, st drift.State) {
			yield(otelexport.HealthRow{Provider: k.Provider, Model: k.Model, Labels: sinkLabels(k.Labels), State: st})
		})
	})
}

// healthChanged logs a row's change of health once and counts it. A row
// turning slow is a warning: its model answers slower than it did.
func healthChanged(k stats.Key, h drift.Health) {
	labels := sinkLabels(k.Labels)
	fields := []zap.Field{
		zap.String("provider", k.Provider), zap.String("model", k.Model),
		zap.String("state", h.State.String()), zap.String("reason", h.Reason),
		zap.Time("since", h.Since),
	}
	for _, l := range labels {
		fields = append(fields, zap.String("label."+l.Name, l.Value))
	}
	logger := caddy.Log().Named("tokentap.health")
	if h.State == drift.Slow {
		logger.Warn("model slower than its own baseline", fields...)
	} else {
		logger.Info("model health changed", fields...)
	}
	healthInstruments.Load().RecordHealthChange(k.Provider, k.Model, labels, h.State)
}

func sinkLabels(ls []stats.Label) []sink.Label {
	out := make([]sink.Label, len(ls))
	for i, l := range ls {
		out[i] = sink.Label{Name: l.Name, Value: l.Value}
	}
	return out
}
