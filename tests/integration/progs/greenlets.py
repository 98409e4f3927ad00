"""Python greenlets for the switch-function path (suite_19_runtimes.py): N
greenlets, each switched to K + 1 times (K switches back to main, then its
return). With --wait it says READY and waits for a line on stdin first, so a
tracer can attach. Prints its own counts: the trace must hold exactly these."""
import sys

import greenlet

args = [a for a in sys.argv[1:] if a != "--wait"]
n = int(args[0]) if args else 100
k = int(args[1]) if len(args) > 1 else 10
if "--wait" in sys.argv:
    print("READY", flush=True)
    sys.stdin.readline()
main = greenlet.getcurrent()


def body():
    for _ in range(k):
        main.switch()


lets = [greenlet.greenlet(body) for _ in range(n)]
switches = 0
for g in lets:
    for _ in range(k + 1):
        g.switch()
        switches += 2  # there, and back to main
print("GREENLETS %d SWITCHES %d DEAD %d" % (n, switches, sum(1 for g in lets if g.dead)))
