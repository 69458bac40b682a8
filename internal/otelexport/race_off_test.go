//go:build !race

package otelexport

const raceEnabled = false
