package caddymodule

import (
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/drift"
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

// healthInstruments are the instruments of the current MeterProvider, for
// counting health changes; set at provisioning.
var healthInstruments atomic.Pointer[otelexport.Instruments]

func init() {
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
