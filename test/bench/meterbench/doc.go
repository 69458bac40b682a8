// Package meterbench holds the whole-meter benchmarks (BenchmarkMeter,
// BenchmarkMeterInterleaved): meter.Meter fed the simulator's real streams,
// write by write. They live here, not in meter, because they need the
// simulator, which is a Caddy module: compiled into meter's tests, Caddy
// would make `go test ./meter` slow to build and its fuzz targets slow to
// run (the fuzzer's coverage covers every package linked in).
package meterbench
