//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package main

import "os"

// isTerminal never trusts stdin elsewhere: a filter-wide action then needs --yes.
func isTerminal(*os.File) bool { return false }
