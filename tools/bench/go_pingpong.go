// go_pingpong: two goroutines passing a token over unbuffered channels, n round trips; prints
// the time per round trip ("N ns/iter"). Each round trip parks and readies each goroutine
// once: the Go row of make bench (tools/bench/bench.py) times it untraced, under corobpf, and
// under Go's own execution tracer (GO_TRACE=FILE: runtime/trace to FILE for the whole loop).
//
//	go_pingpong N
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"gotrace"
)

func pong(in <-chan int, out chan<- int) {
	for v := range in {
		out <- v + 1
	}
	close(out)
}

func main() {
	n, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if len(os.Args) != 2 || err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "usage: go_pingpong N")
		os.Exit(2)
	}
	defer gotrace.FromEnv()()
	ping, back := make(chan int), make(chan int)
	go pong(ping, back)
	start := time.Now()
	v := 0
	for i := 0; i < n; i++ {
		ping <- v
		v = <-back
	}
	el := time.Since(start)
	close(ping)
	if v != n {
		panic("lost a message")
	}
	fmt.Printf("%.1f ns/iter\n", float64(el.Nanoseconds())/float64(n))
}
