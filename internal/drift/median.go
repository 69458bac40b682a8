package drift

// The baseline is kept sorted (signal.admit), so its median is read. The
// current p50 is of the recent ring, which must stay in arrival order to
// feed the baseline; it is selected from a scratch copy, on the stack,
// when Health is read rather than per request.

// median returns the median of a, the mean of the two middle values when
// len(a) is even, and reorders a. a must be non-empty and hold no NaN.
func median(a []float32) float64 {
	n := len(a)
	k := n / 2
	hi := selectKth(a, k)
	if n%2 == 1 {
		return float64(hi)
	}
	// Selection left a[:k] at or below a[k]; the lower middle value is the
	// largest of them.
	lo := a[0]
	for _, v := range a[1:k] {
		lo = max(lo, v)
	}
	return (float64(lo) + float64(hi)) / 2
}

// selectKth reorders a so that a[k] is the value of rank k (from 0), with
// no larger value before it and no smaller one after, and returns it.
// Quickselect with a median-of-three pivot: linear on average, and its
// quadratic worst case on adversarial input is still only MaxLag²
// comparisons.
func selectKth(a []float32, k int) float32 {
	lo, hi := 0, len(a)-1
	for hi > lo {
		// Order a[lo], a[mid], a[hi] so the pivot a[mid] is their median
		// and the ends are sentinels for the scans below.
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// Now a[lo..j] <= p <= a[i..hi], and a[j+1..i-1] == p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}
