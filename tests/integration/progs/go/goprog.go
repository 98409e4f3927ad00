// goprog: goroutines whose every park the program arranges itself, and writes down.
//
// The integration tests (tests/integration/suite_21_go.py) trace this unmodified Go program
// and compare the trace with what it records here, as JSON, in the file named by
// COROBPF_TRUTH: each goroutine's goid (from runtime.Stack's "goroutine N [" header), the
// goroutine that started it (main, or for the short ones the spawner, which passes its goid
// in), the function it runs, how many times it parked on a channel and on which one (the
// hchan address, %p), its parks on a sync.Mutex, in a select and in the network poller, its
// sleeps, its Gosched calls, whether it ends. A park is counted only where it is certain: a
// sender sends only after runtime.Stack shows the receiver parked in "[chan receive]" (and
// for the network poller, only after the reader has consumed the last byte), so each
// receive parks exactly once.
//
//	goprog            launch mode: run the scenario and exit 0
//	goprog --wait F   attach mode: start the goroutines that park before the attach, print
//	                  "READY <pid>", and wait for file F to exist before the rest
//	goprog spin       one goroutine runs long without a switch while another waits for the
//	                  only P: run it with GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 (the spin
//	                  has no call in its loop, so nothing can preempt it)
//
// GO_TRACE=FILE also runs Go's own execution tracer (runtime/trace) into FILE, from the first
// line of main to the last, as a second oracle (tools/go/src/gotrace, shared with the bench).
// Standard library only: it builds offline in GOPATH mode with tools/go on GOPATH
// (tools/tools.mk).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gotrace"
)

const (
	pings   = 20   // receives of the pinger, each a park
	sleeps  = 5    // time.Sleep calls of the sleeper
	yields  = 30   // runtime.Gosched calls of the yielder
	shorts  = 2000 // goroutines spawned and finished
	ioReads = 10   // reads of the netpoller reader, each a park in the network poller
	locks   = 10   // rounds of the locker: a park on a channel, then one on a sync.Mutex
	selects = 10   // selects of the selecter, each a park
	// The spinner's loop: some 200 ms of CPU time on this project's test machine, well over
	// the long-run threshold (50 ms of time on a CPU, however busy the machine); the test
	// reads how long it took from the truth.
	spinIters = 160000000
	// The syscall-blocked goroutine stays in read(2) this long after it is seen there: well
	// over the `blocking` threshold (10 ms) and under the stall threshold (1 s).
	blockFor = 300 * time.Millisecond
	// The leaked goroutine stays parked at least this long before the program ends: over the
	// stall threshold (1 s), so that a leak is due.
	leakFor = 1500 * time.Millisecond
)

// One goroutine as the program knows it. Counts are exact; -1 where the program cannot know
// the count (a park the runtime may or may not make, as in a WaitGroup or a polling loop).
type goroutine struct {
	Goid      int64  `json:"goid"`
	Parent    int64  `json:"parent"` // 0: started by the runtime (the main goroutine)
	Name      string `json:"name"`   // the function the goroutine runs
	Role      string `json:"role"`
	ChanWaits int    `json:"chan_waits"`
	Chan      string `json:"chan,omitempty"` // the channel of those waits
	// Other parks the runtime calls waits: on a sync.Mutex (semacquire), in a select.
	SyncWaits   int  `json:"sync_waits"`
	SelectWaits int  `json:"select_waits"`
	IOWaits     int  `json:"io_waits"` // parks in the network poller
	Sleeps      int  `json:"sleeps"`
	Gosched     int  `json:"gosched"` // runtime.Gosched calls (preemptions may add yields)
	Exits       bool `json:"exits"`
	PreAttach   bool `json:"pre_attach,omitempty"` // started and parked before the attach
	// Parked before the attach: where, by the runtime's own traceback (runtime.Stack), its
	// functions innermost first as it prints them (without the runtime's: gopark, chanrecv).
	ParkedIn []string `json:"parked_in,omitempty"`
}

type truth struct {
	Pid        int          `json:"pid"`
	Mode       string       `json:"mode"`
	Goroutines []*goroutine `json:"goroutines"`
	// spin: how long the spinner spun (its run holds at least that) and how long the starved
	// goroutine waited from its `go` statement to its first instruction (its runnable time
	// holds at most that).
	SpinNs        int64 `json:"spin_ns,omitempty"`
	StarvedWaitNs int64 `json:"starved_wait_ns,omitempty"`
	// From the spinner's start to the starved goroutine's first instruction, which comes
	// right after the spinner's run ends (at the first call after its loop, where the runtime
	// takes the P back). SpinNs also holds the starved one's run and the switch back, which
	// take milliseconds on a loaded machine; this holds neither.
	SpinRunNs int64 `json:"spin_run_ns,omitempty"`
}

var (
	stackBuf    = make([]byte, 1<<20) // runtime.Stack(all) of main's polls
	shortGoids  [shorts]int64
	shortParent [shorts]int64
	shortsDone  int32
	ioDone      int32 // reads done by the netpoller reader
	workDone    int32
)

// goid: the number in runtime.Stack's "goroutine N [" header, as the runtime prints it.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	// Parsed by hand: strconv would allocate, and an allocation may park (GC assist).
	var n int64
	for _, c := range b[len("goroutine "):] {
		if c == ' ' {
			return n
		}
		n = n*10 + int64(c-'0')
	}
	panic("no goid in " + string(b))
}

// status: goroutine g's state in runtime.Stack(all)'s header ("chan receive", "syscall",
// "sleep"...), "" if it is not listed.
func status(g int64) string {
	all := string(stackBuf[:runtime.Stack(stackBuf, true)])
	head := fmt.Sprintf("goroutine %d [", g)
	for _, block := range strings.Split(all, "\n\n") {
		if strings.HasPrefix(block, head) {
			s := block[len(head):]
			return s[:strings.IndexAny(s, ",]")]
		}
	}
	return ""
}

// waitFor polls with short sleeps (never one park long enough to be a stall) until cond holds.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(200 * time.Microsecond)
	}
}

// parkedIn: the functions of goroutine g's traceback in runtime.Stack(all), innermost first.
func parkedIn(g int64) []string {
	all := string(stackBuf[:runtime.Stack(stackBuf, true)])
	head := fmt.Sprintf("goroutine %d [", g)
	for _, block := range strings.Split(all, "\n\n") {
		if !strings.HasPrefix(block, head) {
			continue
		}
		var fns []string
		for _, line := range strings.Split(block, "\n")[1:] {
			if line == "" || line[0] == '\t' || strings.HasPrefix(line, "created by ") {
				continue
			}
			if i := strings.LastIndex(line, "("); i > 0 {
				line = line[:i]
			}
			fns = append(fns, line)
		}
		return fns
	}
	return nil
}

func waitStatus(g int64, want string) {
	waitFor(func() bool { return status(g) == want })
}

// sleepFor sleeps d in short sleeps: the main goroutine's own sleeps stay under the stall
// threshold whatever the machine's load.
func sleepFor(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
}

func pinger(me chan<- int64, c <-chan int, done chan<- int) {
	me <- goid()
	sum := 0
	for i := 0; i < pings; i++ {
		sum += <-c
	}
	done <- sum
}

func sleeper(me chan<- int64) {
	me <- goid()
	for i := 0; i < sleeps; i++ {
		time.Sleep(2 * time.Millisecond)
	}
	atomic.AddInt32(&workDone, 1)
}

func yielder(me chan<- int64) {
	me <- goid()
	for i := 0; i < yields; i++ {
		runtime.Gosched()
	}
	atomic.AddInt32(&workDone, 1)
}

func leaker(me chan<- int64, c <-chan int) {
	me <- goid()
	<-c // nobody ever sends
}

func blocker(me chan<- int64, fd int) {
	me <- goid()
	var b [1]byte
	// A raw read(2) on a blocking pipe: syscall.Read goes through syscall.Syscall
	// (entersyscall: the goroutine keeps its thread, blocked in the kernel), not the netpoller.
	if n, err := syscall.Read(fd, b[:]); n != 1 || err != nil {
		panic(fmt.Sprint("read: ", n, err))
	}
	atomic.AddInt32(&workDone, 1)
}

func netreader(me chan<- int64, r *os.File) {
	me <- goid()
	var b [1]byte
	// os.Pipe's ends are non-blocking and in the network poller: a read with nothing to
	// read parks the goroutine ("IO wait"), its thread free.
	for i := 0; i < ioReads; i++ {
		if n, err := r.Read(b[:]); n != 1 || err != nil {
			panic(fmt.Sprint("pipe read: ", n, err))
		}
		atomic.AddInt32(&ioDone, 1)
	}
	atomic.AddInt32(&workDone, 1)
}

func locker(me chan<- int64, turn <-chan int, mu *sync.Mutex) {
	me <- goid()
	for i := 0; i < locks; i++ {
		<-turn
		mu.Lock()
		mu.Unlock()
	}
	atomic.AddInt32(&workDone, 1)
}

func selecter(me chan<- int64, a, b <-chan int) {
	me <- goid()
	for i := 0; i < selects; i++ {
		select {
		case <-a:
		case <-b:
		}
	}
	atomic.AddInt32(&workDone, 1)
}

func short(parent int64, i int) {
	shortGoids[i] = goid()
	shortParent[i] = parent
	atomic.AddInt32(&shortsDone, 1)
}

func spawner(me chan<- int64) {
	me <- goid()
	self := goid()
	for i := 0; i < shorts; i++ {
		go short(self, i)
	}
	atomic.AddInt32(&workDone, 1)
}

func parked(me chan<- int64, c <-chan int) {
	me <- goid()
	<-c
	atomic.AddInt32(&workDone, 1)
}

var (
	spinSink  uint64
	spinStart time.Time // the spinner's start, for the starved goroutine (one P: no race)
)

// spinner spins with no call in its loop: under asyncpreemptoff, nothing can take its P.
func spinner(g *int64, ns *int64, done chan<- struct{}) {
	*g = goid()
	start := time.Now()
	spinStart = start
	x := uint64(1)
	for i := uint64(0); i < spinIters; i++ {
		x = x*6364136223846793005 + i
	}
	spinSink = x
	// Preempted here at the latest (sysmon asked long ago; this call is the first chance).
	*ns = int64(time.Since(start))
	close(done)
}

func starved(g *int64, goAt time.Time, waited *int64, spunFor *int64, done chan<- struct{}) {
	now := time.Now()
	*waited = int64(now.Sub(goAt))
	*spunFor = int64(now.Sub(spinStart))
	*g = goid()
	close(done)
}

// spinMain: the spin scenario. Its truth is written by main, which parks on channels for the
// whole spin: nothing else waits for the P meanwhile.
func spinMain(t *truth) {
	if runtime.GOMAXPROCS(0) != 1 {
		panic("spin: run with GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1")
	}
	t.Mode = "spin"
	main := t.Goroutines[0].Goid
	var spinG, starvedG int64
	done, spun := make(chan struct{}), make(chan struct{})
	goAt := time.Now()
	// The later `go` takes the P's next slot: the spinner runs first, the starved one waits.
	go starved(&starvedG, goAt, &t.StarvedWaitNs, &t.SpinRunNs, done)
	go spinner(&spinG, &t.SpinNs, spun)
	<-done
	<-spun
	t.Goroutines = append(t.Goroutines,
		&goroutine{Goid: spinG, Parent: main, Name: "main.spinner", Role: "spinner", Exits: true},
		&goroutine{Goid: starvedG, Parent: main, Name: "main.starved", Role: "starved",
			Exits: true})
	for _, g := range t.Goroutines[1:] {
		g.ChanWaits, g.SyncWaits, g.SelectWaits, g.IOWaits, g.Sleeps = 0, 0, 0, 0, 0
	}
}

func writeTruth(t *truth) {
	if path := os.Getenv("COROBPF_TRUTH"); path != "" {
		js, err := json.Marshal(t)
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(path, js, 0o644); err != nil {
			panic(err)
		}
	}
}

func main() {
	defer gotrace.FromEnv()()
	t := &truth{Pid: os.Getpid(), Mode: "launch"}
	main := goid()
	// The main goroutine (runtime.main, which runs main.main): named `main`, as corobpf names
	// every family's main context (docs/go.md).
	t.Goroutines = append(t.Goroutines, &goroutine{Goid: main, Name: "main",
		Role: "main", ChanWaits: -1, SyncWaits: -1, SelectWaits: -1, IOWaits: -1, Sleeps: -1,
		Gosched: -1})
	if len(os.Args) == 2 && os.Args[1] == "spin" {
		spinMain(t)
		writeTruth(t)
		fmt.Printf("spun\n")
		return
	}
	// Buffered: a child reports its goid without parking.
	me := make(chan int64, 1)
	add := func(g *goroutine) *goroutine {
		g.Goid = <-me
		g.Parent = main
		t.Goroutines = append(t.Goroutines, g)
		return g
	}

	// Before the attach (attach mode; in launch mode, the same at the start): two goroutines
	// parked on one channel, one on its own, and the leaked one.
	shared, own, leak := make(chan int), make(chan int), make(chan int)
	pre := []*goroutine{}
	for i, c := range []chan int{shared, shared, own} {
		go parked(me, c)
		g := add(&goroutine{Name: "main.parked", Role: fmt.Sprintf("parked%d", i),
			ChanWaits: 1, Chan: fmt.Sprintf("%p", c), Exits: true})
		pre = append(pre, g)
	}
	go leaker(me, leak)
	lk := add(&goroutine{Name: "main.leaker", Role: "leaked", ChanWaits: 1,
		Chan: fmt.Sprintf("%p", leak)})
	for _, g := range append(pre, lk) {
		waitStatus(g.Goid, "chan receive")
	}
	if len(os.Args) == 3 && os.Args[1] == "--wait" {
		t.Mode = "attach"
		for _, g := range append(pre, lk) {
			g.PreAttach = true
			g.ParkedIn = parkedIn(g.Goid)
		}
		fmt.Printf("READY %d\n", os.Getpid())
		waitFor(func() bool { _, err := os.Stat(os.Args[2]); return err == nil })
	} else if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: goprog [--wait FILE]")
		os.Exit(2)
	}
	// Counted from here: attached, a tracer sees the leaked goroutine parked from the attach
	// on, and the test makes the file only once the tracer is attached.
	leakedAt := time.Now()
	// Release the parked ones, each after it is seen parked (it is), and wait for their ends.
	for _, c := range []chan int{shared, shared, own} {
		c <- 1
	}
	waitFor(func() bool { return atomic.LoadInt32(&workDone) == 3 })

	// A pinger: each of its receives parks once, on the same channel.
	ping, pingDone := make(chan int), make(chan int, 1)
	go pinger(me, ping, pingDone)
	pg := add(&goroutine{Name: "main.pinger", Role: "pinger", ChanWaits: pings,
		Chan: fmt.Sprintf("%p", ping), Exits: true})
	for i := 1; i <= pings; i++ {
		waitStatus(pg.Goid, "chan receive")
		ping <- i
	}
	waitFor(func() bool { return len(pingDone) == 1 })
	sum := <-pingDone

	// Parks in the network poller, on a sync.Mutex, in a select: each seen before it ends.
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	go netreader(me, r)
	nr := add(&goroutine{Name: "main.netreader", Role: "netreader", IOWaits: ioReads,
		Exits: true})
	for i := 0; i < ioReads; i++ {
		// A goroutine the poller made ready still shows "IO wait" until it runs (the poller
		// is polled later): it must have read the last byte first, then parked again.
		waitFor(func() bool { return atomic.LoadInt32(&ioDone) == int32(i) })
		waitStatus(nr.Goid, "IO wait")
		if _, err := w.Write([]byte{'x'}); err != nil {
			panic(err)
		}
	}
	var mu sync.Mutex
	turn := make(chan int)
	go locker(me, turn, &mu)
	lo := add(&goroutine{Name: "main.locker", Role: "locker", ChanWaits: locks,
		Chan: fmt.Sprintf("%p", turn), SyncWaits: locks, Exits: true})
	for i := 0; i < locks; i++ {
		waitStatus(lo.Goid, "chan receive")
		mu.Lock()
		turn <- i
		waitStatus(lo.Goid, "semacquire")
		mu.Unlock()
	}
	sa, sb := make(chan int), make(chan int)
	go selecter(me, sa, sb)
	se := add(&goroutine{Name: "main.selecter", Role: "selecter", SelectWaits: selects,
		Exits: true})
	for i := 0; i < selects; i++ {
		waitStatus(se.Goid, "select")
		if i%2 == 0 {
			sa <- i
		} else {
			sb <- i
		}
	}
	waitFor(func() bool { return atomic.LoadInt32(&workDone) == 3+3 })

	// Sleeps, Gosched yields, and 2,000 goroutines that start and end.
	go sleeper(me)
	add(&goroutine{Name: "main.sleeper", Role: "sleeper", Sleeps: sleeps, Exits: true})
	go yielder(me)
	add(&goroutine{Name: "main.yielder", Role: "yielder", Gosched: yields, Exits: true})
	go spawner(me)
	add(&goroutine{Name: "main.spawner", Role: "spawner", Exits: true})
	waitFor(func() bool { return atomic.LoadInt32(&shortsDone) == shorts })
	for i, g := range shortGoids {
		t.Goroutines = append(t.Goroutines, &goroutine{Goid: g, Parent: shortParent[i],
			Name: "main.short", Role: "short", Exits: true})
	}

	// A goroutine blocked in read(2), holding its thread, until main writes to the pipe.
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		panic(err)
	}
	go blocker(me, fds[0])
	bl := add(&goroutine{Name: "main.blocker", Role: "syscall", Exits: true})
	waitStatus(bl.Goid, "syscall")
	sleepFor(blockFor)
	if n, err := syscall.Write(fds[1], []byte{'x'}); n != 1 || err != nil {
		panic(fmt.Sprint("write: ", n, err))
	}
	waitFor(func() bool { return atomic.LoadInt32(&workDone) == 3+3+4 })

	// The leaked goroutine has been parked long enough, and still is.
	sleepFor(leakFor - time.Since(leakedAt))
	if s := status(lk.Goid); s != "chan receive" {
		panic("the leaked goroutine is " + s)
	}
	writeTruth(t)
	fmt.Printf("pings %d sum %d shorts %d\n", pings, sum, shorts)
}
