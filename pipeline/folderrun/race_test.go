//go:build race

package folderrun_test

// raceEnabled is set in a -race build, where the scale test would take minutes.
const raceEnabled = true
