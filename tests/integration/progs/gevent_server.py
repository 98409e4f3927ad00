"""A gevent web server, as gevent's users write one (suite_28_precision.py): pywsgi, the
standard library patched (monkey.patch_all), and a thread pool for work that holds the GIL
in C (hashing). Healthy, it blocks no greenlet: the hub waits for work in epoll_wait, the
pool's idle threads on their queue. Nothing here is corobpf's doing.

    gevent_server.py [--plant] SECONDS

Prints "READY <pid> <port>" once listening on 127.0.0.1 and serves SECONDS from then, then
"SERVED <requests>" and exits 0. GET / answers after a gevent.sleep of 2 ms; GET /pool hashes
64 KiB in the thread pool.

--plant: one second after READY, five greenlets start ticking (a gevent.sleep of 10 ms, 40
times each) and a sixth calls the unpatched time.sleep(0.3): its thread blocked while the
five have work queued, the bug. Prints "PLANTED blocking <start> <end>" (CLOCK_BOOTTIME
ns, corobpf's clock) around that sleep."""
from gevent import monkey

monkey.patch_all()

import hashlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402

unpatched_sleep = monkey.get_original("time", "sleep")
served = 0


def app(environ, start_response):
    global served
    served += 1
    if environ["PATH_INFO"] == "/pool":
        data = os.urandom(65536)
        body = gevent.get_hub().threadpool.apply(lambda: hashlib.sha256(data).hexdigest())
    else:
        gevent.sleep(0.002)
        body = "ok"
    body = (body + "\n").encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


def ticker():
    for _ in range(40):
        gevent.sleep(0.01)


def blocker():
    t0 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    unpatched_sleep(0.3)
    t1 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    print("PLANTED blocking %d %d" % (t0, t1), flush=True)


def plant():
    gevent.sleep(1)
    ticks = [gevent.spawn(ticker) for _ in range(5)]
    gevent.sleep(0.05)
    gevent.spawn(blocker).join()
    gevent.joinall(ticks)


def main():
    args = [a for a in sys.argv[1:] if a != "--plant"]
    seconds = float(args[0]) if args else 3
    server = WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    print("READY %d %d" % (os.getpid(), server.server_port), flush=True)
    extra = gevent.spawn(plant) if "--plant" in sys.argv else None
    gevent.sleep(seconds)
    if extra:
        extra.join()
    server.stop()
    print("SERVED %d" % served, flush=True)


main()
