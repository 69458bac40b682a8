package meter

import "unsafe"

// view returns b as a string without copying, so gjson can read an event in
// place. The result must not outlive b's contents: callers use it only for
// the duration of one event and copy anything they keep.
func view(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// bytesOf returns the bytes of s without copying, for passing a gjson
// substring of a view back to Observer methods that copy what they keep.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
