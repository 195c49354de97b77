package shed

// Cohort returns the cohort (0 <= k < Cohorts) of a user key in a rotation
// epoch. It is a pure function of its inputs (FNV-1a), so every instance of
// every service puts a user in the same cohort during an epoch, and a new
// epoch reshuffles who gives way first. An empty key gets the top cohort: an
// anonymous request is shed only by its class ceiling.
func Cohort(user string, epoch int64) uint32 {
	if user == "" {
		return Cohorts - 1
	}
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(user); i++ {
		h ^= uint64(user[i])
		h *= prime
	}
	for i := 0; i < 8; i++ {
		h ^= uint64(byte(epoch >> (8 * i)))
		h *= prime
	}
	h ^= h >> 29
	return uint32(h % Cohorts)
}
