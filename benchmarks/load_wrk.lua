-- wrk script of benchmarks/load.py: an open-loop schedule of GET requests over a mixed list of
-- paths, with the viewer's session cookie, one record per request.
--
-- wrk runs with as many threads as connections (-t N -c N), so each thread's Lua state owns
-- exactly one connection and can pair each response with its request. Request i (0-based, over
-- all connections) is due at start + i / rate; connection c sends requests c, c + N, c + 2N...
-- each at its due time, or as soon as its previous answer came when that is later. A request's
-- latency is counted from its due time (a late request's wait for its connection included), so
-- a slow server shows as latency, not as a lower rate. Requests not sent or not answered when wrk
-- stops are counted by load.py from sent/answered.
--
-- Arguments (after --): rate (per second), seconds, start (CLOCK_MONOTONIC, milliseconds),
-- connections, paths file (one "family path" per line), cookies file (one Cookie header per
-- line, a signed-in viewer each: connection c is viewer c mod the count), output file, stop file
-- ("-": none; once it exists, each connection sends nothing more and finishes as soon as its
-- request in flight is answered, so a load stopped early counts no answer it cut off).
-- Output: one line per answered request, "family status due_to_answer_ms send_to_answer_ms hit
-- due_ms" (hit: 1 when the console's micro-cache answered, X-Crucible-Cache; due_ms: when it was
-- due, from the start),
-- then "# sent N answered M" per connection. OUT.done gets one byte per connection whose share
-- is sent and answered (or timed out).

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } crucible_timespec;
int clock_gettime(int clk_id, crucible_timespec *tp);
]]
local clock = ffi.new("crucible_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, clock) -- CLOCK_MONOTONIC, as Python's time.monotonic()
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads = {}
local counter = 0

function setup(thread)
  thread:set("conn", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  rate = tonumber(args[1])
  seconds = tonumber(args[2])
  start = tonumber(args[3])
  nconn = tonumber(args[4])
  out_path = args[7]
  stop_path = args[8]
  families, paths = {}, {}
  for line in io.lines(args[5]) do
    local family, path = line:match("^(%S+)%s+(%S+)$")
    if family then
      table.insert(families, family)
      table.insert(paths, path)
    end
  end
  local cookies = {}
  for line in io.lines(args[6]) do
    if line ~= "" then
      table.insert(cookies, line)
    end
  end
  headers = { ["Cookie"] = cookies[conn % #cookies + 1], ["Accept-Encoding"] = "identity" }
  total = math.floor(rate * seconds)
  index = conn -- the next request's global index
  sent, answered = 0, 0
  rows = {}
end

local due, sent_at, current
local finished = false

local function finish()
  -- one byte per connection in OUT.done: load.py interrupts wrk once all are there
  if not finished then
    finished = true
    local mark = io.open(out_path .. ".done", "a")
    mark:write("x")
    mark:close()
  end
  wrk.thread:stop()
end

local function stopped()
  if stop_path == "-" then
    return false
  end
  local mark = io.open(stop_path, "r")
  if mark then
    mark:close()
    return true
  end
  return false
end

local scheduled = false -- delay() ran for the coming request

function delay()
  scheduled = true
  if index >= total then
    return 0
  end
  due = start + index * 1000 / rate
  return math.max(0, math.ceil(due - now_ms()))
end

function request()
  if not scheduled then
    -- wrk's check of the script calls request() once before any delay(); what it returns is
    -- never sent
    return wrk.format("GET", paths[1], headers)
  end
  scheduled = false
  if index >= total or stopped() then -- this connection's share is sent: the request below
    finish() -- never leaves
    return wrk.format("GET", paths[1], headers)
  end
  local slot = index % #paths + 1
  current = { families[slot], due }
  index = index + nconn
  sent = sent + 1
  sent_at = now_ms()
  return wrk.format("GET", paths[slot], headers)
end

function response(status, headers, _body)
  local now = now_ms()
  answered = answered + 1
  local hit = (headers["x-crucible-cache"] or headers["X-Crucible-Cache"]) == "hit" and 1 or 0
  rows[#rows + 1] = string.format(
    "%s %d %.2f %.2f %d %.0f", current[1], status, now - current[2], now - sent_at, hit,
    current[2] - start
  )
  if index >= total or stopped() then
    finish()
  end
end

function done(_summary, _latency, _requests)
  local file = io.open(threads[1]:get("out_path"), "w") -- init() ran in the threads only
  for _, thread in ipairs(threads) do
    for _, row in ipairs(thread:get("rows")) do
      file:write(row, "\n")
    end
    file:write(string.format("# sent %d answered %d\n", thread:get("sent"), thread:get("answered")))
  end
  file:close()
end
