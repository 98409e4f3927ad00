// Package gotrace starts Go's own execution tracer (runtime/trace) when GO_TRACE names a file:
// the test program (tests/integration/progs/go/goprog.go) and the bench's Go row
// (tools/bench/go_pingpong.go) run under it to compare its cost and its view with corobpf's.
// Built in GOPATH mode: tools/tools.mk puts tools/go on GOPATH.
package gotrace

import (
	"os"
	"runtime/trace"
)

// FromEnv starts the tracer into $GO_TRACE, if set (a file it cannot create panics), and
// returns what stops it and closes the file; the caller defers that for the whole run.
func FromEnv() (stop func()) {
	f := os.Getenv("GO_TRACE")
	if f == "" {
		return func() {}
	}
	out, err := os.Create(f)
	if err != nil {
		panic(err)
	}
	if err := trace.Start(out); err != nil {
		panic(err)
	}
	return func() {
		trace.Stop()
		out.Close()
	}
}
