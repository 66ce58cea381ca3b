package kernel

// SetActivityFlushers replaces the kernel's activity writer by one with n flushers; zero
// writes each entry alone, as before grouping (for benchmarks that compare them).
func (k *Kernel) SetActivityFlushers(n int) {
	if k.activityW != nil {
		k.activityW.stopWriter()
		k.activityW = nil
	}
	if n > 0 {
		k.activityW = newActivityWriter(k, n)
	}
}
