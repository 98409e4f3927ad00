// goserver: an HTTP server as Go programs are written, for the precision corpus
// (tests/integration/suite_28_precision.py): net/http, and a pool of four workers taking jobs
// from a channel. Healthy, it has goroutines parked for as long as nobody calls (the
// workers, the accept loop, idle connections): none of that is a finding.
//
//	goserver serve SECONDS  print "READY <pid> <port>", serve on 127.0.0.1 for SECONDS, print
//	                        "SERVED <requests>" and exit 0
//	goserver spin SECONDS   the same; one second after READY a goroutine spins 300 ms with no
//	                        call in its loop while two others, woken by timers every 5 ms,
//	                        wait for the CPU: run it with GOMAXPROCS=1
//	                        GODEBUG=asyncpreemptoff=1 (nothing preempts the spin). Prints
//	                        "PLANTED long_run <goid> <start> <end>" (CLOCK_BOOTTIME ns)
//	goserver leak           main returns while the four workers still wait on their channel:
//	                        leaked goroutines by goleak's definition. Prints "PLANTED leak
//	                        <goid>" for each
//	goserver read           prints "READY <pid>", then main blocks in read(2) on stdin (a raw
//	                        system call: its thread blocked in the kernel) until a line or EOF
//
// Standard library only: it builds offline in GOPATH mode (tools/tools.mk).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

type job struct {
	n     int
	reply chan int
}

var served int64

// The planted spin's iterations: some 300 ms on this project's test machine.
const spinIters = 300000000

// goid: the N of "goroutine N [" in the goroutine's own traceback.
func goid() int64 {
	var b [64]byte
	s := strings.Fields(string(b[:runtime.Stack(b[:], false)]))
	n, _ := strconv.ParseInt(s[1], 10, 64)
	return n
}

func boottime() int64 {
	var ts syscall.Timespec
	// CLOCK_BOOTTIME (7): corobpf's clock.
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 7, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func worker(jobs <-chan job, me chan<- int64) {
	if me != nil {
		me <- goid()
	}
	for j := range jobs {
		s := 0
		for i := 0; i < j.n; i++ {
			s += i
		}
		j.reply <- s
	}
}

func plantSpin() {
	time.Sleep(time.Second)
	for i := 0; i < 2; i++ {
		go func() {
			for k := 0; k < 100; k++ {
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	done := make(chan [4]int64)
	go func() {
		id, t0 := goid(), boottime()
		// No call in the loop: nothing can take the P from it (some 300 ms here).
		s := int64(0)
		for i := int64(0); i < spinIters; i++ {
			s += i ^ (s >> 3)
		}
		done <- [4]int64{id, t0, boottime(), s}
	}()
	r := <-done
	fmt.Printf("PLANTED long_run %d %d %d\n", r[0], r[1], r[2])
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: goserver serve|spin SECONDS | goserver leak|read")
		os.Exit(2)
	}
	jobs := make(chan job)
	if os.Args[1] == "read" {
		fmt.Printf("READY %d\n", os.Getpid())
		os.Stdout.Sync()
		var b [1]byte
		syscall.Read(0, b[:])
		return
	}
	if os.Args[1] == "leak" {
		me := make(chan int64)
		for i := 0; i < 4; i++ {
			go worker(jobs, me)
		}
		for i := 0; i < 4; i++ {
			fmt.Printf("PLANTED leak %d\n", <-me)
		}
		// Long enough for every worker to be parked on the channel, and for a stall
		// threshold to pass: still, none of this is what makes them leaked.
		time.Sleep(1200 * time.Millisecond)
		return
	}
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	for i := 0; i < 4; i++ {
		go worker(jobs, nil)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		j := job{n: 20000, reply: make(chan int)}
		jobs <- j
		fmt.Fprintf(w, "ok %d\n", <-j.reply)
		atomic.AddInt64(&served, 1)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Printf("READY %d %d\n", os.Getpid(), ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	if os.Args[1] == "spin" {
		plantSpin()
	}
	time.Sleep(time.Until(end))
	srv.Close()
	fmt.Printf("SERVED %d\n", atomic.LoadInt64(&served))
}
