// Package browsertest drives skiplock's web dashboard (package ui) in a real browser:
// Debian's chromium under github.com/chromedp/chromedp. It is a module of its own so that
// chromedp stays out of skiplock's go.mod.
//
// The tests load every page, pause a queue, retry dead jobs (selected, then all matching
// through the confirmation page), delete one, draw a workflow (one node per step, in its
// state's colour, linking to the step's job page) and cancel it, show a queue's fairness,
// ordering, per-key rate limit and topics and turn ordering off, and check each change in
// the database. They
// save a screenshot of every page in $SKIPLOCK_SCREENSHOTS, or in a temporary directory
// when it is unset. Without a chromium binary (chromium, chromium-browser or google-chrome
// on PATH, or $CHROMIUM) they skip; scripts/test installs Debian's chromium when run as root.
package browsertest
