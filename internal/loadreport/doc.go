// Package loadreport turns the reports of `tokentap load` (package loadgen)
// into what people compare runs with: one self-contained HTML file of
// charts and tables, and a side-by-side comparison of runs as a table or
// JSON (`tokentap load compare`).
//
// The HTML works offline and anywhere a file can be opened: its charts are
// SVG drawn here, not by a script, its style is inline under a
// Content-Security-Policy that allows nothing else, and it fetches
// nothing. The reports it was drawn from are embedded as JSON, so the file
// is also the data.
//
// It imports loadgen, never Caddy, so that tools reading reports link none.
package loadreport
