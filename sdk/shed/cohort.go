package shed

// Cohort returns the cohort (0 <= k < Cohorts) of a user key in a rotation
// epoch. It is a pure function of its inputs, so every instance of every
// service puts a user in the same cohort during an epoch, and a new epoch
// reshuffles who gives way first: the user key is hashed (FNV-1a), the
// epoch mixed in, and the result finalized with MurmurHash3's fmix64, so a
// user's cohorts in different epochs are independent of each other (every
// user spends about the same share of the epochs in the lowest cohorts) and
// users spread evenly over the cohorts. An empty key gets the top cohort: an
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
	// The low bits of an FNV-1a hash depend only on the low bits of the
	// bytes, so with the epoch appended to the key (and bits 29-32 folded
	// in) users moved between cohorts in fixed groups from one epoch to the
	// next; fmix64 makes every bit of the result depend on every bit of the
	// key's hash and of the epoch.
	h ^= uint64(epoch) * 0x9e3779b97f4a7c15
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h % Cohorts)
}
