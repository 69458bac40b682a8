package meter

// A raw reader of JSON objects for the Bedrock dialects' hot path: it hands
// out values as they are written, so reading generated text never
// allocates.

// bedrockMembers calls fn with the key (as written, without its quotes) and
// the raw value of each member of the JSON object obj, until fn returns
// false. Unlike gjson's ForEach it never unescapes a string: gjson
// allocates for every string value with an escape in it, and generated text
// is full of \n and \", which would make the hot path allocate. A malformed
// object ends the iteration where it goes wrong.
func bedrockMembers(obj string, fn func(key, value string) bool) {
	i := bedrockSkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = bedrockSkipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := bedrockValueEnd(obj, i)
		if end < 0 {
			return
		}
		key := obj[i+1 : end-1]
		i = bedrockSkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = bedrockSkipSpace(obj, i+1)
		if i >= len(obj) {
			return
		}
		end = bedrockValueEnd(obj, i)
		if end < 0 || !fn(key, obj[i:end]) {
			return
		}
		i = bedrockSkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// bedrockMember is the raw value of obj's member key, "" if absent.
func bedrockMember(obj, key string) (value string) {
	bedrockMembers(obj, func(k, v string) bool {
		if k == key {
			value = v
			return false
		}
		return true
	})
	return value
}

// bedrockText is the inside of a raw JSON string value, escapes kept (what
// EstimateTokens reads); ok is false for anything but a non-empty string.
func bedrockText(raw string) (string, bool) {
	if len(raw) < 3 || raw[0] != '"' {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// bedrockValueEnd is the index just past the JSON value that starts at
// s[i], or -1 when it does not end. It checks nesting and string escapes,
// nothing more: what is inside is read later, if at all.
func bedrockValueEnd(s string, i int) int {
	switch s[i] {
	case '"':
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				end := bedrockValueEnd(s, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) && s[j] > ' ' && s[j] != ',' && s[j] != '}' && s[j] != ']' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

func bedrockSkipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
