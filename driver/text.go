package driver

import (
	"strings"
	"unicode/utf8"
)

// storableText makes s acceptable to a PostgreSQL text parameter, which must be valid
// UTF-8 without NUL: the server refuses anything else with SQLSTATE 22021, a class-22 error
// that no retry fixes. The driver passes a handler's error text through it before jobs_fail
// and jobs_cancel record it, so that a failure is recorded (with its backoff, RetryAt or
// cancellation) rather than lost until the lease expires. Invalid bytes become U+FFFD and NUL
// bytes are dropped; valid text is returned unchanged.
func storableText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// storableTextError says why s is not acceptable to a PostgreSQL text parameter, or ""
// when it is: for names given by the caller (queues, kinds, keys, the client's ID), which are
// refused with an *InvalidError rather than changed.
func storableTextError(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain NUL"
	}
	return ""
}

// cutText returns at most the first n bytes of s, cut at a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
