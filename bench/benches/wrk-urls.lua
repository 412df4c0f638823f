-- wrk script for apid's read benchmark: requests the paths listed in the
-- file given as the first script argument, round robin, each thread from
-- its own offset; prints one machine-readable line when done.
local paths = {}
local i = 0

init = function(args)
  for line in io.lines(args[1]) do
    paths[#paths + 1] = line
  end
  i = math.random(#paths)
end

request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d non2xx=%d\n",
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
