# make bench's Ruby row (bench.py switch_costs): one fiber resumed N times in a tight loop.
# An iteration is a round trip, two switches (coroutine_transfer into the fiber and back).
# Times itself around the loop, as the C loop programs do, so start-up is not counted;
# on the thread's CPU clock: the uprobe's trap and BPF program run in the thread and are
# counted, time spent waiting for a CPU on a shared machine is not.
n = (ARGV[0] || 100000).to_i
f = Fiber.new { loop { Fiber.yield } }
f.resume
t0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
n.times { f.resume }
t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - t0
puts format("%d iterations, %.2f ns/iter", n, t.to_f / n)
