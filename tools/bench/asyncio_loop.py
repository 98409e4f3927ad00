"""make bench's asyncio row (bench.py switch_costs): one asyncio task stepping N times, each
step a bare yield (asyncio.sleep(0)) that the event loop runs again at once. An iteration is
a step, two switches (the loop to the task and back). Times itself around the loop on the
thread's CPU clock, as greenlet_loop.py does: the uprobes' traps and BPF programs run in the
thread and are counted, waits for a CPU on a shared machine are not."""
import asyncio
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000


async def spin():
    t0 = time.thread_time_ns()
    for _ in range(n):
        await asyncio.sleep(0)
    return time.thread_time_ns() - t0


t = asyncio.run(spin())
print("%d iterations, %.2f ns/iter" % (n, t / n))
