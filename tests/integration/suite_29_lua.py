"""Lua coroutines, traced with no flags (docs/lua.md): Debian's lua5.4 (5.4.4), and LuaJIT 2.1
(OpenResty's luajit2, the one Debian's nginx Lua module uses) through nginx serving requests.

coros.lua counts its own coroutines, resumes and how each run ended; bpftrace counts, in the
same run, the calls of lua_resume and lua_newthread. nginx counts the requests it served, and
each request's handler says how many times it slept and read its cosocket. Outside CI a
missing runtime skips its test, saying why; in CI it fails."""
import collections
import socket
import threading

from harness import *  # noqa: F401,F403
from suite_19_runtimes import Bpftrace, attach_to, need, fields

PROGS = os.path.join(ROOT, "tests", "integration", "progs")
LUA54 = "/usr/bin/lua5.4"
LUAJIT = "/usr/bin/luajit"
COROS = os.path.join(PROGS, "coros.lua")
NAME = re.compile(r"^(\.\.\.)?[\w/.-]*progs/coros\.lua:\d+$|^main$")


def lua_oracle(name, exe=LUA54):
    return Bpftrace(name, [("resume", exe, "lua_resume", ""), ("made", exe, "lua_newthread", "")])


def check_coros(tr, pid, counts, oracle, launched=True):
    """The trace against the program's own counts and bpftrace's."""
    eq({r["family"] for r in tr.records if r["type"] == "switch_path" and r["pid"] == pid}
       >= {"lua"}, True, "families used")
    cos = [c for c in tr.coroutines if c["pid"] == pid]
    made = [c for c in cos if c["created"] is not None]
    eq(len(made), counts["COROUTINES"], "coroutines seen made (the program's count)")
    eq(len(cos), counts["COROUTINES"] + 1, "coroutines: those made and the main thread")
    main = [c for c in cos if c["created"] is None]
    eq([c["name"] for c in main], ["main"], "the main state, named main")
    check(all(NAME.match(c["name"] or "") for c in cos),
          "names: %s" % sorted({c["name"] for c in cos if not NAME.match(c["name"] or "")})[:5])
    ids = {c["uid"]: c for c in cos}
    sw = [e for e in tr.by_ev("switch") if e["pid"] == pid]
    # A resume is a switch into a coroutine made, with the resumer waiting on it.
    resumes = [e for e in sw if e["reason"] == "wait"]
    eq(len(resumes), counts["RESUMES"], "resumes (the program's count)")
    eq(all(e["obj"] == e["to"] for e in resumes), True, "a resumer waits on what it resumed")
    nested = [e for e in resumes if e.get("from_uid") in ids and
              ids[e["from_uid"]]["name"] != "main"]
    eq(len(nested), counts["NESTED"], "resumes from inside a coroutine")
    outs = collections.Counter(e["reason"] for e in sw if e["reason"] != "wait")
    eq(outs["yield"], counts["YIELDS"], "runs that ended in a yield")
    eq(outs["done"], counts["RETURNS"] + counts["ERRORS"], "runs that ended the coroutine")
    exits = collections.Counter(e["status"] for e in tr.by_ev("exit") if e["pid"] == pid)
    eq(exits[0], counts["RETURNS"], "coroutines that returned (status 0)")
    eq(exits[-2], counts["ERRORS"], "coroutines that raised (status -LUA_ERRRUN)")
    eq(exits[-125], counts["CLOSED"], "coroutines closed while suspended (-ECANCELED)")
    if oracle is not None:
        eq(len(resumes), oracle.get("resume", 0), "resumes (bpftrace's count of lua_resume)")
        eq(len(made), oracle.get("made", 0), "coroutines made (bpftrace's count of lua_newthread)")
    # Parents: the main thread, or the outer coroutine that made an inner one.
    for c in made:
        p = ids.get(c["parent_uid"])
        check(p is not None, "%s (%s) has no parent in the trace" % (c["id"], c["name"]))
        if c["name"].endswith(":26") and p["name"] != "main":
            eq(p["name"].endswith(":53"), True, "an inner coroutine's parent is an outer one")


@test
def lua54_coroutines_launched():
    """corobpf -- lua5.4 app.lua: every coroutine, every resume and how it ended, exact, named
    by source:line, with no flags."""
    if not need(LUA54):
        return
    cmd = [LUA54, COROS, "300", "6"]
    oracle = lua_oracle("lua54")
    tr, _, p, out, raw = trace_launch("lua54", cmd, extra=[])
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(tr)
    check_coros(tr, pid, fields(p.stdout, "COROUTINES"), got)
    check("lua: %s: Lua 5.4.4" % LUA54 in p.stderr, p.stderr)
    check_replay(out, raw)


@test
def lua54_coroutines_attached():
    """corobpf -p on a waiting lua5.4: the same, from the attach on."""
    if not need(LUA54):
        return
    oracle = lua_oracle("lua54_attached")
    target = subprocess.Popen([LUA54, COROS, "--wait", "200", "4"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    eq(target.stdout.readline().split()[:1], ["READY"], "the program's first line")
    tr, stdout, _ = attach_to(target, "lua54_attached")
    got = oracle.counts(target.pid)
    check_clean(tr)
    check_coros(tr, target.pid, fields(stdout, "COROUTINES"), got, launched=False)


@test
def lua_other_release_refused_by_name():
    """A Lua whose lua_ident says another release (a copy of lua5.4 saying 5.3) is refused,
    naming the release, and runs untouched."""
    if not need(LUA54):
        return
    with open(LUA54, "rb") as f:
        data = f.read()
    check(data.count(b"$LuaVersion: Lua 5.4.4") == 1, "lua5.4's lua_ident not found")
    fake = work("lua53")
    with open(fake, "wb") as f:
        f.write(data.replace(b"$LuaVersion: Lua 5.4.4", b"$LuaVersion: Lua 5.3.4"))
    os.chmod(fake, 0o755)
    p = corobpf(["-o", work("lua53.jsonl"), "--", fake, COROS, "20", "2"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    check("%s: Lua 5.3.4: a Lua release whose layout corobpf does not know" % fake in p.stderr,
          p.stderr)
    check("COROUTINES 28 " in p.stdout, "the program's output: %r" % p.stdout)
    tr = Trace(work("lua53.jsonl"))
    eq(len(tr.coroutines), 0, "coroutines traced")


# ---- nginx with its Lua module (OpenResty's model): each request a LuaJIT coroutine ----

NGINX = "/usr/sbin/nginx"
NGX_LUA = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
NGX_NDK = "/usr/lib/nginx/modules/ndk_http_module.so"
LIBLUAJIT = "/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2"

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
load_module {ndk};
load_module {lua};
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    lua_shared_dict stats 1m;
    server {{
        listen 127.0.0.1:{port};
        location /sleep {{ content_by_lua_block {{
            ngx.sleep(0.002)
            ngx.sleep(0.002)
            ngx.shared.stats:incr("sleeps", 2, 0)
            ngx.say("slept")
        }} }}
        location /cosock {{ content_by_lua_block {{
            local s = ngx.socket.tcp()
            assert(s:connect("127.0.0.1", {port}))
            s:send("GET /plain HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
            local d = assert(s:receive("*a"))
            s:close()
            ngx.say(#d)
        }} }}
        location /plain {{ return 200 "plain\\n"; }}
        location /stats {{ content_by_lua_block {{ ngx.say(ngx.shared.stats:get("sleeps") or 0) }} }}
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_conf(name):
    d = work(name)
    os.makedirs(d, exist_ok=True)
    port = free_port()
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(d=d, ndk=NGX_NDK, lua=NGX_LUA, port=port))
    return d, conf, port


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    return data.split(b" ", 2)[1] == b"200"


def wait_serving(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if get(port, "/plain"):
                return
        except OSError:
            time.sleep(0.1)
    raise Failure("nginx did not serve on port %d" % port)


def serve(port, per_kind, threads=4):
    """Requests to /sleep and /cosock from several clients at once: how many were served."""
    served = collections.Counter()
    lock = threading.Lock()

    def client(i):
        for r in range(per_kind):
            for path in ("/sleep", "/cosock"):
                ok = get(port, path)
                with lock:
                    served[path if ok else "failed"] += 1

    ts = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return served


def nginx_stop(d, proc=None):
    with open(os.path.join(d, "nginx.pid")) as f:
        os.kill(int(f.read()), signal.SIGQUIT)
    if proc is not None:
        proc.wait(timeout=60)


def check_nginx(tr, pid, served, sleeps, oracle):
    """Each request's Lua thread a coroutine named by its location's block, ngx.sleep a sleep,
    the cosocket an I/O wait, the request's end its exit; counts exact."""
    requests = served["/sleep"] + served["/cosock"]
    eq(served["failed"], 0, "requests that failed")
    cos = [c for c in tr.coroutines if c["pid"] == pid and
           (c["name"] or "").startswith("content_by_lua(nginx.conf:")]
    eq(len(cos), requests + 1, "coroutines of a content_by_lua block: each request's, and "
       "/stats's")
    ends = collections.Counter(c["end"] for c in cos)
    eq(ends["exit"], requests + 1, "request coroutines that ended (exit)")
    exits = [e for e in tr.by_ev("exit") if e["pid"] == pid]
    eq(collections.Counter(e["status"] for e in exits)[0], len(exits), "exits with status 0")
    # Made at their first resume (docs/lua.md): one a request, in a thread lua_newthread made or
    # nginx reused (lua_resetthread).
    creates = [e for e in tr.by_ev("create") if e["pid"] == pid]
    eq(len(creates), len([c for c in tr.coroutines if c["pid"] == pid]), "creates")
    eq(len(creates), requests + 1, "creates: each request's coroutine, and /stats's")
    check(oracle.get("made", 0) + oracle.get("reused", 0) >= len(creates),
          "threads made or reused (bpftrace) %d, fewer than coroutines made %d"
          % (oracle.get("made", 0) + oracle.get("reused", 0), len(creates)))
    sw = [e for e in tr.by_ev("switch") if e["pid"] == pid]
    ins = [e for e in sw if e["to"] != "0x0"]
    eq(len(ins), oracle.get("resume", 0), "resumes (bpftrace's count of lua_resume)")
    why = collections.Counter(e["reason"] for e in sw if e["to"] == "0x0")
    eq(why["sleep"], sleeps, "sleeps (nginx's own count, in its shared dict)")
    eq(why["sleep"], 2 * served["/sleep"], "two sleeps a /sleep request")
    eq(why["io"], oracle.get("yield", 0) - sleeps, "I/O waits (bpftrace: lua_yield calls that "
       "are not ngx.sleep's)")
    check(why["io"] >= served["/cosock"], "at least one I/O wait a /cosock request: %d of %d"
          % (why["io"], served["/cosock"]))
    eq(why["done"], len(exits), "a 'done' switch out after each exit")


def nginx_oracle(name):
    return Bpftrace(name, [("resume", LIBLUAJIT, "lua_resume", ""),
                           ("made", LIBLUAJIT, "lua_newthread", ""),
                           ("reused", LIBLUAJIT, "lua_resetthread", ""),
                           ("yield", LIBLUAJIT, "lua_yield", "")])


@test
def lua_nginx_requests_launched():
    """corobpf -- nginx with Debian's Lua module, serving real requests from 4 clients: every
    request's Lua thread, its sleeps and cosocket waits, and its end, exact."""
    if not need(NGINX, NGX_LUA, NGX_NDK, LIBLUAJIT):
        return
    d, conf, port = nginx_conf("nginx_launched")
    out = work("nginx_launched.jsonl")
    oracle = nginx_oracle("nginx_launched")
    tr, ef, err = start_tracer(["-o", out, "--raw", out + ".raw", "--",
                                NGINX, "-c", conf, "-p", d], "nginx_launched")
    try:
        wait_serving(port)
        served = serve(port, 25)
        sleeps_said = []
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /stats HTTP/1.0\r\nHost: x\r\n\r\n")
            body = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                body += b
        sleeps_said.append(int(body.split(b"\r\n\r\n", 1)[1]))
        nginx_stop(d)
        tr.wait(timeout=120)
    finally:
        ef.close()
        if tr.poll() is None:
            tr.kill()
    with open(err) as f:
        errtext = f.read()
    eq(tr.returncode, 0, "corobpf exit code (%s)" % errtext[-2000:])
    trace = Trace(out)
    pid = trace.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(trace)
    check_nginx(trace, pid, served, sleeps_said[0], got)
    check("lua: %s" % NGX_LUA in errtext and "(1 sleep, " in errtext, errtext[-3000:])
    check_replay(out, out + ".raw")


@test
def lua_nginx_requests_attached():
    """corobpf -p on a serving nginx: the requests from the attach on, exact."""
    if not need(NGINX, NGX_LUA, NGX_NDK, LIBLUAJIT):
        return
    d, conf, port = nginx_conf("nginx_attached")
    ngx = subprocess.Popen([NGINX, "-c", conf, "-p", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_serving(port)
        serve(port, 2)  # the Lua VM warm, a coroutine or two cached before the attach
        out = work("nginx_attached.jsonl")
        oracle = nginx_oracle("nginx_attached")
        tr, ef, err = start_tracer(["-p", str(ngx.pid), "-o", out], "nginx_attached")
        wait_for(err, "Ctrl-C to stop", timeout=60)
        served = serve(port, 20)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /stats HTTP/1.0\r\nHost: x\r\n\r\n")
            body = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                body += b
        sleeps = int(body.split(b"\r\n\r\n", 1)[1]) - 2 * 4 * 2
        nginx_stop(d, ngx)
        tr.wait(timeout=120)
        ef.close()
    finally:
        if ngx.poll() is None:
            ngx.kill()
            ngx.wait()
    eq(tr.returncode, 0, "corobpf exit code")
    trace = Trace(out)
    got = oracle.counts(ngx.pid)
    check_clean(trace)
    check_nginx(trace, ngx.pid, served, sleeps, got)


@test
def lua_luajit_resumes_from_lua_are_said_unseen():
    """LuaJIT's coroutine.resume runs in its VM, never through lua_resume: a LuaJIT program
    whose coroutines are all resumed from Lua shows none (bpftrace: lua_resume 0 times), and
    the end says so, naming LuaJIT, instead of generic advice."""
    if not need(LUAJIT):
        return
    oracle = lua_oracle("luajit", LUAJIT)
    out = work("luajit.jsonl")
    p = corobpf(["-o", out, "--", LUAJIT, COROS, "100", "5"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    counts = fields(p.stdout, "COROUTINES")
    check(counts["RESUMES"] > 500, "the program's resumes: %s" % counts)
    tr = Trace(out)
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    eq(got.get("resume", 0), 0, "bpftrace's count of lua_resume")
    eq(len(tr.coroutines), 0, "coroutines traced")
    check_clean(tr)
    check("no context switch seen in process %d (luajit); corobpf looked for lua (luajit: "
          "LuaJIT 2.1)" % pid in p.stderr, p.stderr)
    check("LuaJIT: a coroutine resumed from Lua (coroutine.resume) runs inside LuaJIT's VM"
          in p.stderr, p.stderr)


@test
def lua_custom_spec_from_is_honoured():
    """--switch uprobe:lua5.4:lua_resume:from=arg1,to=arg0 sees each resume (the entry only):
    the `from` it names is honoured, never replaced by the coroutine running, and where it is
    not what runs (every resume after the first: the switch back at the yield is not probed)
    the trace counts it and the end says so."""
    if not need(LUA54):
        return
    prog = work("resume6000.lua")
    with open(prog, "w") as f:
        f.write("local cos = {}\n"
                "for i = 1, 1000 do cos[i] = coroutine.create(function()\n"
                "  for r = 1, 5 do coroutine.yield() end end) end\n"
                "local n = 0\n"
                "for r = 1, 6 do for i = 1, 1000 do coroutine.resume(cos[i]); n = n + 1 end end\n"
                "print('RESUMES ' .. n)\n")
    out = work("lua_custom.jsonl")
    p = corobpf(["-o", out, "--switch", "uprobe:%s:lua_resume:from=arg1,to=arg0" % LUA54,
                 "--", LUA54, prog])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    eq(p.stdout.split(), ["RESUMES", "6000"], "the program's output")
    tr = Trace(out)
    pid = tr.processes[0]["pid"]
    sw = [e for e in tr.by_ev("switch") if e["pid"] == pid and e["from"] != "0x0"]
    eq(len(sw), 6000, "switches: one a resume, as the spec names them")
    main = "0x%x" % ((1 << 63) | pid)
    eq(all(e["from"] == main for e in sw), True, "each from the main thread, as arg1 says")
    a = tr.trailer["anomalies"]
    eq(a["switch_from_mismatch"] + a["thread_desync"], 5999,
       "switches whose from was not what ran (counted)")
    check("5999 switch-from mismatches" in p.stderr, p.stderr)
