// goload: a Go program under load, for attaches that come and go while it runs
// (tests/integration/suite_21_go.py, go_attach_under_load).
//
// It creates goroutines as fast as it can (spawners whose goroutines end at once, or after a
// channel round trip, a short sleep or a yield), runs a net/http server and its clients in the
// same process (a connection per request for some clients: a goroutine per connection, parked
// in the network poller), keeps goroutines parked on channels of their own for a while
// (sentinels), and a few goroutines that stay parked for the whole run, started by closures
// and by `go f(x)` statements of each kind a test of names needs.
//
// Its truth is what Go's own runtime says, written as JSON lines into the file named by
// COROBPF_TRUTH as the program goes:
//
//	{"pid": N}
//	{"snap": [T0, T1], "gs": [[goid, "name", "status"], ...]}
//	    every goroutine runtime.Stack(all) lists, the world stopped between the CLOCK_BOOTTIME
//	    readings T0 and T1 (so the list is exact at an instant between them), each with its
//	    status as the traceback's header gives it and the function Go's traceback names it
//	    by: the outermost frame it prints (the closure the compiler wraps a `go f(x)`
//	    statement in is not printed once f runs: f is; a closure of the program is
//	    "pkg.fn.funcN"). "" for a goroutine that has not started: the traceback of one
//	    started by a `go f(x)` statement shows that closure then, and runtime.goexit
//	{"sentinel": goid, "chan": "0x...", "parked": T, "released": T}
//	    a goroutine parked on its channel (receive) from before `parked` to after `released`
//
//	goload F    print "READY <pid>", run until file F exists, write the truth, exit 0
//
// Standard library only: built offline in GOPATH mode (tools/tools.mk).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	spawners  = 2                     // goroutines creating goroutines as fast as they can
	batch     = 64                    // each waits for its batch of 64 before the next
	clients   = 3                     // HTTP clients, one of them without keep-alive
	snapEvery = 50 * time.Millisecond // runtime.Stack(all) snapshots
	// Sentinels: one started every sentinelEvery, each parked for 0.2 to 2.6 s.
	sentinelEvery = 20 * time.Millisecond
	clockBoottime = 7 // CLOCK_BOOTTIME, the clock of corobpf's timestamps
)

var (
	// The read ends of the pipes written to: kept open (never read), so that writes block.
	readEnds []*os.File
	out      *bufio.Writer
	outMu    sync.Mutex
	stop     int32
	sink     int64
)

// boottime: CLOCK_BOOTTIME in ns, the clock corobpf stamps its records with.
func boottime() int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime,
		uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return ts.Nano()
}

func emit(v interface{}) {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	outMu.Lock()
	out.Write(js)
	out.WriteByte('\n')
	outMu.Unlock()
}

// goid: the number in runtime.Stack's "goroutine N [" header.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	f := strings.Fields(string(b))
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		panic(string(b))
	}
	return n
}

// frameFunc: the function of a traceback's frame line, "pkg.(*T).m(0xc000..., ...)" ->
// "pkg.(*T).m": the line less its last parenthesized group (the arguments).
func frameFunc(line string) string {
	depth := 0
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				return line[:i]
			}
		}
	}
	return line
}

// snapshot: every goroutine runtime.Stack(all) lists, with its outermost printed frame.
func snapshot(buf []byte) []byte {
	for {
		t0 := boottime()
		n := runtime.Stack(buf, true)
		t1 := boottime()
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		var gs [][3]interface{}
		for _, block := range strings.Split(string(buf[:n]), "\n\n") {
			lines := strings.Split(block, "\n")
			f := strings.Fields(lines[0])
			if len(f) < 2 || f[0] != "goroutine" {
				continue
			}
			id, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			status := strings.TrimSuffix(strings.Join(f[2:], " "), ":")
			status = strings.TrimSuffix(strings.TrimPrefix(status, "["), "]")
			if i := strings.Index(status, ","); i >= 0 {
				status = status[:i]
			}
			name := ""
			for _, l := range lines[1:] {
				if l == "" || l[0] == '\t' || strings.HasPrefix(l, "created by ") ||
					strings.HasPrefix(l, "...") {
					continue
				}
				name = frameFunc(l)
			}
			if name == "runtime.goexit" {
				name = ""
			}
			gs = append(gs, [3]interface{}{id, name, status})
		}
		emit(map[string]interface{}{"snap": []int64{t0, t1}, "gs": gs})
		return buf
	}
}

type sentinelRec struct {
	Goid     int64  `json:"sentinel"`
	Chan     string `json:"chan"`
	Parked   int64  `json:"parked"`
	Released int64  `json:"released"`
}

func sentinel(r *sentinelRec, c <-chan int, started chan<- struct{}) {
	r.Goid = goid()
	r.Parked = boottime()
	started <- struct{}{}
	<-c
}

// sentinels: one started every sentinelEvery, released after its lifetime.
func sentinels(done chan<- struct{}) {
	type live struct {
		r   *sentinelRec
		c   chan int
		end time.Time
	}
	var all []live
	started := make(chan struct{}, 1)
	for i := 0; atomic.LoadInt32(&stop) == 0; i++ {
		r := &sentinelRec{}
		c := make(chan int)
		r.Chan = fmt.Sprintf("%p", c)
		go sentinel(r, c, started)
		<-started
		all = append(all, live{r, c, time.Now().Add(time.Duration(200+(i*37)%2400) *
			time.Millisecond)})
		now := time.Now()
		kept := all[:0]
		for _, l := range all {
			if now.After(l.end) {
				l.r.Released = boottime()
				l.c <- 1
				emit(l.r)
				continue
			}
			kept = append(kept, l)
		}
		all = kept
		time.Sleep(sentinelEvery)
	}
	for _, l := range all {
		l.r.Released = boottime()
		l.c <- 1
		emit(l.r)
	}
	close(done)
}

// The goroutines spawners make: each ends soon, in one of several ways.
func churnExit(wg *sync.WaitGroup) { wg.Done() }

func churnPing(wg *sync.WaitGroup, c chan int) {
	c <- 1
	wg.Done()
}

func spawner(id int, done *sync.WaitGroup) {
	defer done.Done()
	c := make(chan int, batch)
	for n := 0; atomic.LoadInt32(&stop) == 0; n++ {
		var wg sync.WaitGroup
		wg.Add(batch)
		for i := 0; i < batch; i++ {
			switch (n + i + id) % 6 {
			case 0, 1:
				go churnExit(&wg)
			case 2:
				go churnPing(&wg, c)
			case 3:
				go func() {
					time.Sleep(50 * time.Microsecond)
					wg.Done()
				}()
			case 4:
				go func() {
					runtime.Gosched()
					wg.Done()
				}()
			case 5:
				go func(k int) {
					atomic.AddInt64(&sink, int64(k))
					wg.Done()
				}(i)
			}
		}
		for len(c) > 0 {
			<-c
		}
		wg.Wait()
	}
}

func handler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	fmt.Fprintf(w, "hello %s\n", r.URL.Path)
}

func client(url string, keepAlive bool, done *sync.WaitGroup) {
	defer done.Done()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
	for i := 0; atomic.LoadInt32(&stop) == 0; i++ {
		resp, err := c.Get(fmt.Sprintf("%s/%d", url, i))
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.CloseIdleConnections()
}

// The goroutines that stay parked all run long, started in each way a name depends on.
func parkedForGood(pw, pw2 *os.File, big string) {
	// A closure that calls only time.Sleep: Go names it main.parkedForGood.func1.
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// `go f(x)`: the compiler's closure around it is not shown; Go names it time.Sleep.
	go time.Sleep(time.Hour)
	// A closure that makes a timer and waits on it (time.NewTimer, then a receive).
	go func() {
		t := time.NewTimer(time.Hour)
		<-t.C
	}()
	// Writes to a pipe nobody reads, parked in the network poller once it is full: as a
	// `go` statement (Go names it fmt.Fprint) and in a closure of its own.
	go fmt.Fprint(pw, big)
	go func() {
		fmt.Fprint(pw2, big)
	}()
	// A closure called with an argument, and a function value: the compiler's closure around
	// each calls it through its own words, and Go names the goroutine after what it calls.
	forever := make(chan int)
	go func(c chan int) {
		<-c
	}(forever)
	wait := func(c chan int) { <-c }
	go wait(forever)
}

func main() {
	path := os.Getenv("COROBPF_TRUTH")
	if len(os.Args) != 2 || path == "" {
		fmt.Fprintln(os.Stderr, "usage: COROBPF_TRUTH=FILE goload STOPFILE")
		os.Exit(2)
	}
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	out = bufio.NewWriterSize(f, 1<<20)
	emit(map[string]int{"pid": os.Getpid()})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(handler)}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String()

	pr, pw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	pr2, pw2, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	readEnds = append(readEnds, pr, pr2)
	parkedForGood(pw, pw2, strings.Repeat("x", 1<<20))

	var wg sync.WaitGroup
	for i := 0; i < spawners; i++ {
		wg.Add(1)
		go spawner(i, &wg)
	}
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go client(url, i != 0, &wg)
	}
	sdone := make(chan struct{})
	go sentinels(sdone)

	fmt.Printf("READY %d\n", os.Getpid())
	buf := make([]byte, 1<<20)
	for {
		time.Sleep(snapEvery)
		buf = snapshot(buf)
		if _, err := os.Stat(os.Args[1]); err == nil {
			break
		}
	}
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	<-sdone
	srv.Close()
	outMu.Lock()
	if err := out.Flush(); err != nil {
		panic(err)
	}
	outMu.Unlock()
	f.Close()
}
