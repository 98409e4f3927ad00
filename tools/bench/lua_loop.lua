-- make bench's Lua row (bench.py interp_costs): one coroutine resumed N times in a tight
-- loop, each resume a yield back. An iteration is two switches (into the coroutine and back).
-- Times itself around the loop on os.clock(), the process's CPU time: the uprobes' traps and
-- BPF programs run in the thread and are counted, waits for a CPU are not.
local n = tonumber(arg[1]) or 100000
local co = coroutine.create(function()
  while true do coroutine.yield() end
end)
local resume = coroutine.resume
resume(co)
local t0 = os.clock()
for _ = 1, n do
  resume(co)
end
local t = os.clock() - t0
print(string.format("%d iterations, %.2f ns/iter", n, t * 1e9 / n))
