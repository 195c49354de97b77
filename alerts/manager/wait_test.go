package manager

import "runtime"

// waitBriefly yields to the queue workers while a test waits for one to
// arm its back-off timer on the fake clock.
func waitBriefly() { runtime.Gosched() }
