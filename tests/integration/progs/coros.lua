-- Lua coroutines that count their own resumes, for corobpf's Lua family (suite_29_lua.py).
--
--   lua5.4 coros.lua [--wait] N ROUNDS
--
-- N coroutines (coroutine.create), each resumed until it ends: it yields ROUNDS times, then
-- returns, or raises an error (every fifth). N/10 more are closed (coroutine.close) while
-- suspended in a yield. N/10 "outer" coroutines each make and resume an inner one (a resume
-- from a coroutine: nested lua_resume), and N/10 go through coroutine.wrap. The program
-- counts what it did:
--
--   COROUTINES n RESUMES r YIELDS y RETURNS t ERRORS e CLOSED c NESTED s
--
-- COROUTINES: made; RESUMES: resumes that ran a coroutine; YIELDS, RETURNS, ERRORS: how
-- those runs ended; CLOSED: closed while suspended; NESTED: of RESUMES, those made from
-- inside another coroutine.
-- --wait: print READY, then wait for a line on stdin before starting.
-- It runs under LuaJIT too (Lua 5.1's language: no coroutine.close there, so none closed).

local args = { ... }
local wait = args[1] == "--wait"
if wait then table.remove(args, 1) end
local n, rounds = tonumber(args[1]), tonumber(args[2])

local c = { COROUTINES = 0, RESUMES = 0, YIELDS = 0, RETURNS = 0, ERRORS = 0, CLOSED = 0,
            NESTED = 0 }

local function body(i)
  for r = 1, rounds do
    coroutine.yield(r)
  end
  if i % 5 == 0 then
    error("a coroutine that fails")
  end
  return i
end

-- Resume co until it ends, counting each run by how it ended.
local function drive(co, arg, nested)
  while true do
    local ok = coroutine.resume(co, arg)
    c.RESUMES = c.RESUMES + 1
    if nested then c.NESTED = c.NESTED + 1 end
    if not ok then
      c.ERRORS = c.ERRORS + 1
      return
    elseif coroutine.status(co) == "dead" then
      c.RETURNS = c.RETURNS + 1
      return
    end
    c.YIELDS = c.YIELDS + 1
  end
end

local function outer(i)
  local inner = coroutine.create(body)
  c.COROUTINES = c.COROUTINES + 1
  drive(inner, i * 5 + 1, true)
  coroutine.yield()
  return i
end

if wait then
  io.write("READY\n")
  io.flush()
  io.read("*l")
end

for i = 1, n do
  local co = coroutine.create(body)
  c.COROUTINES = c.COROUTINES + 1
  drive(co, i, false)
end
local tenth = math.floor(n / 10)
for i = 1, coroutine.close and tenth or 0 do
  local co = coroutine.create(body)
  c.COROUTINES = c.COROUTINES + 1
  assert(coroutine.resume(co, 1))
  c.RESUMES = c.RESUMES + 1
  c.YIELDS = c.YIELDS + 1
  assert(coroutine.close(co))
  c.CLOSED = c.CLOSED + 1
end
for i = 1, tenth do
  local co = coroutine.create(outer)
  c.COROUTINES = c.COROUTINES + 1
  drive(co, i, false)
end
for i = 1, tenth do
  local f = coroutine.wrap(function()
    for r = 1, rounds do coroutine.yield(r) end
  end)
  c.COROUTINES = c.COROUTINES + 1
  for r = 1, rounds + 1 do
    f()
    c.RESUMES = c.RESUMES + 1
  end
  c.YIELDS = c.YIELDS + rounds
  c.RETURNS = c.RETURNS + 1
end

print(string.format("COROUTINES %d RESUMES %d YIELDS %d RETURNS %d ERRORS %d CLOSED %d NESTED %d",
                    c.COROUTINES, c.RESUMES, c.YIELDS, c.RETURNS, c.ERRORS, c.CLOSED, c.NESTED))
