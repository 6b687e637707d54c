package ui

import "time"

// TokenFor is a valid CSRF token for a form posting to path (without the prefix), as the
// pages render it.
func (h *Handler) TokenFor(path string) string {
	return h.csrf.token(h.basePath+path, time.Now())
}
