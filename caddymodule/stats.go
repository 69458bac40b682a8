package caddymodule

// recordStats adds a finished exchange to the live stats.
func (h *Handler) recordStats(f *finished) {}
