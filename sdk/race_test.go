//go:build race

package governor_test

const raceEnabled = true
