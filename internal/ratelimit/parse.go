package ratelimit

import "time"

// maxDuration bounds what a header may say, a year: a longer wait is a
// malformed value, and the bound keeps the arithmetic from overflowing.
const maxDuration = 365 * 24 * time.Hour

// decimal reads a non-negative decimal number ("2", "0.5") of unit.
func decimal(s string, unit time.Duration) (time.Duration, bool) {
	s = trim(s)
	v, rest, ok := number(s)
	if !ok || rest != "" {
		return 0, false
	}
	return scaled(v, unit)
}

// scaled is v units as a duration, if within maxDuration.
func scaled(v float64, unit time.Duration) (time.Duration, bool) {
	d := v * float64(unit)
	if !(d <= float64(maxDuration)) {
		return 0, false
	}
	return time.Duration(d), true
}

// number reads the non-negative decimal number at the start of s and
// returns what follows it.
func number(s string) (v float64, rest string, ok bool) {
	var whole int64
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if whole > int64(maxDuration) {
			// Past any value scaled() admits: stop before overflowing.
			return 0, "", false
		}
		whole = whole*10 + int64(s[i]-'0')
	}
	digits := i
	var frac float64
	if i < len(s) && s[i] == '.' {
		scale := 0.1
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			frac += float64(s[i]-'0') * scale
			scale /= 10
			digits++
		}
	}
	if digits == 0 {
		return 0, "", false
	}
	return float64(whole) + frac, s[i:], true
}

// units are the units of a Go-style duration, longest first where one is
// the other's prefix.
var units = [...]struct {
	name string
	d    time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond}, {"μs", time.Microsecond},
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour},
}

// duration reads a reset as OpenAI writes it, a Go-style duration ("1s",
// "6m0s", "2m59.56s", "20ms"), or a bare number of seconds (Azure's "0").
func duration(s string) (time.Duration, bool) {
	s = trim(s)
	if s == "" {
		return 0, false
	}
	if d, ok := decimal(s, time.Second); ok {
		return d, true
	}
	var total time.Duration
	for s != "" {
		v, rest, ok := number(s)
		if !ok {
			return 0, false
		}
		var unit time.Duration
		for _, u := range units {
			if len(rest) >= len(u.name) && rest[:len(u.name)] == u.name &&
				// "m" is not the start of "ms".
				!(u.name == "m" && len(rest) > 1 && rest[1] == 's') {
				unit, rest = u.d, rest[len(u.name):]
				break
			}
		}
		if unit == 0 {
			return 0, false
		}
		d, ok := scaled(v, unit)
		if !ok {
			return 0, false
		}
		total += d
		if total > maxDuration {
			return 0, false
		}
		s = rest
	}
	return total, true
}

// untilRFC3339 reads an RFC 3339 time ("2025-08-21T12:40:59Z", with an
// optional fraction and offset) and returns how long after now it is,
// never less than zero (the provider's clock and the proxy's may differ
// by a little).
func untilRFC3339(s string, now time.Time) (time.Duration, bool) {
	s = trim(s)
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' ||
		(s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > 31 ||
		hour > 23 || minute > 59 || sec > 60 {
		return 0, false
	}
	rest := s[19:]
	nsec := 0
	if rest != "" && rest[0] == '.' {
		i, scale := 1, 100000000
		for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
			nsec += int(rest[i]-'0') * scale
			scale /= 10
		}
		if i == 1 {
			return 0, false
		}
		rest = rest[i:]
	}
	var offset int
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := digits(rest[1:3])
		om, okm := digits(rest[4:6])
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, false
		}
		offset = (oh*60 + om) * 60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).Add(-time.Duration(offset) * time.Second)
	d := t.Sub(now)
	if d > maxDuration {
		return 0, false
	}
	return max(d, 0), true
}

// digits reads s, all ASCII digits.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
