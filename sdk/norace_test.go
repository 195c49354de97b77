//go:build !race

package governor_test

const raceEnabled = false
