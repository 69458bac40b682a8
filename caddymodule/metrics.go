package caddymodule

// recordMetrics records a finished exchange's metric points.
func (h *Handler) recordMetrics(f *finished) {}
