package caddymodule

// recordLogFields adds a finished exchange's measurement to Caddy's access
// log entry for the request.
func (x *exchange) recordLogFields(f *finished) {}
