"""make bench's greenlet row (bench.py switch_costs): two greenlets switching N times in a
tight loop. An iteration is a round trip, two switches (g_switchstack into the greenlet and
back). Times itself around the loop, as the C loop programs do, so start-up is not counted;
on the thread's CPU clock: the uprobe's trap and BPF program run in the thread and are
counted, time spent waiting for a CPU on a shared machine is not.
Run with Debian's python (/usr/bin/python3), the one python3-greenlet is built for."""
import sys
import time

from greenlet import getcurrent, greenlet

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
main = getcurrent()


def body():
    while True:
        main.switch()


g = greenlet(body)
g.switch()
switch = g.switch
t0 = time.thread_time_ns()
for _ in range(n):
    switch()
t = time.thread_time_ns() - t0
print("%d iterations, %.2f ns/iter" % (n, t / n))
