// Package bench measures imgpipe's throughput the way the peer scripts in bench/peers
// measure theirs, and writes the same JSON records (bench/README.md, "Record schema"):
//
//   - Raw times the engine alone: RGB frames already in the executor's page-locked slots go
//     through a chain of pixel stages (RunFrames, the one raw-frame driver), against the
//     copy limit MeasureCopy finds and the same chain on the CPU.
//   - Files times a folder end to end (decode, the chain, save as PNG) through pipeline.Run.
//   - Copy measures page-locked and pageable copy bandwidth and profiles one batch.
//
// Every timing is the median of Options.Repeats timed runs after Options.Warmup untimed
// ones; device phases are timed with device events. After timing, results are compared with
// the CPU chain of package stages (the "exact" field). `imgpipe bench` is a thin command
// over this package.
package bench
