"""asyncio tasks that count their own steps, for corobpf's asyncio family (suite_28_python.py).

tasks.py [--wait] WORKERS ROUNDS

main() starts WORKERS worker tasks with asyncio.gather. Each worker, for ROUNDS rounds,
suspends once in one of the ways a task waits: a bare yield (asyncio.sleep(0)), a sleep
(asyncio.sleep(0.0002)), a future set by a callback, a child task it awaits (which returns,
or raises), and a read from a socket (loop.sock_recv, its data sent after the task is
suspended). Then it starts a sleeper, lets it run once and cancels it. Every await counts
the one suspension it makes, so the program knows the switches it made:

    TASKS n STEPS s YIELDS y SLEEPS s WAITS w TASKWAITS t IOS i OK o ERR e CANCELLED c

TASKS: tasks that ran; STEPS: their steps (each task's first, and one after each
suspension); YIELDS, SLEEPS, WAITS (futures and tasks), IOS: suspensions by what they
wait for (TASKWAITS: of WAITS, those on a task); OK, ERR, CANCELLED: how tasks ended.

--wait: PRE tasks are made and suspended first (waiting on an asyncio.Event), then READY is
printed and the program waits for a line on stdin (in an executor thread) before it starts
the rest; what it prints counts only what ran after that line.
"""
import asyncio
import resource
import socket
import sys

count = dict(TASKS=0, STEPS=0, YIELDS=0, SLEEPS=0, WAITS=0, TASKWAITS=0, IOS=0, OK=0, ERR=0,
             CANCELLED=0)
PRE = 20


def suspended(what):
    count[what] += 1
    count["STEPS"] += 1


def started():
    count["TASKS"] += 1
    count["STEPS"] += 1


async def child(fail):
    started()
    await asyncio.sleep(0)
    suspended("YIELDS")
    if fail:
        count["ERR"] += 1
        raise ValueError("a child that fails")
    count["OK"] += 1
    return 1


async def sleeper():
    started()
    count["SLEEPS"] += 1  # it suspends here, and never comes back from the sleep
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        count["STEPS"] += 1  # the step that ran its cancellation
        count["CANCELLED"] += 1
        raise


async def worker(i, rounds):
    loop = asyncio.get_running_loop()
    started()
    for r in range(rounds):
        k = (i + r) % 5
        if k == 0:
            await asyncio.sleep(0)
            suspended("YIELDS")
        elif k == 1:
            await asyncio.sleep(0.0002)
            suspended("SLEEPS")
        elif k == 2:
            fut = loop.create_future()
            loop.call_soon(fut.set_result, r)
            await fut
            suspended("WAITS")
        elif k == 3:
            t = asyncio.ensure_future(child(r % 2 == 1))
            try:
                await t
            except ValueError:
                pass
            suspended("WAITS")
            count["TASKWAITS"] += 1
        else:
            a, b = socket.socketpair()
            a.setblocking(False)
            # Sent once this step has ended: the read below has suspended by then.
            loop.call_soon(b.send, b"x")
            data = await loop.sock_recv(a, 1)
            assert data == b"x"
            a.close()
            b.close()
            suspended("IOS")
    s = asyncio.ensure_future(sleeper())
    await asyncio.sleep(0)
    suspended("YIELDS")
    s.cancel()
    try:
        await s
    except asyncio.CancelledError:
        pass
    suspended("WAITS")
    count["TASKWAITS"] += 1
    count["OK"] += 1


async def pre(event):
    await event.wait()
    count["TASKS"] += 1  # made before the count began: its step after it
    count["STEPS"] += 1
    count["OK"] += 1


async def main(workers, rounds, wait):
    loop = asyncio.get_running_loop()
    if wait:
        event = asyncio.Event()
        pres = [asyncio.ensure_future(pre(event)) for _ in range(PRE)]
        await asyncio.sleep(0)
        print("READY", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        for k in count:
            count[k] = 0
        count["TASKS"] += 1  # main, resumed after the line
        count["STEPS"] += 1
        event.set()
    else:
        started()
    await asyncio.gather(*(worker(i, rounds) for i in range(workers)))
    suspended("WAITS")
    if wait:
        assert all(p.done() for p in pres)
    count["OK"] += 1


def run():
    args = sys.argv[1:]
    wait = args[:1] == ["--wait"]
    if wait:
        args = args[1:]
    workers, rounds = int(args[0]), int(args[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main(workers, rounds, wait))
    finally:
        loop.close()
    print(" ".join("%s %d" % kv for kv in count.items()), flush=True)


run()
