//go:build !race

package httpgov_test

const raceEnabled = false
