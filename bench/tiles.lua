-- wrk: each request reads a random full tile of the bench log (level 0, 1 or the entries).
local full = tonumber(os.getenv("LOG_FULL_TILES"))
math.randomseed(os.time())
local function index(n)
  local digits = string.format("%03d", n)
  while #digits % 3 ~= 0 do digits = "0" .. digits end
  local groups = {}
  for i = 1, #digits, 3 do groups[#groups + 1] = digits:sub(i, i + 2) end
  for i = 1, #groups - 1 do groups[i] = "x" .. groups[i] end
  return table.concat(groups, "/")
end
request = function()
  local pick = math.random(0, 9)
  if math.floor(full / 256) < 1 and pick == 9 then pick = 0 end
  local path
  if pick < 6 then
    path = "/log/tile/0/" .. index(math.random(0, full - 1))
  elseif pick < 9 then
    path = "/log/tile/entries/" .. index(math.random(0, full - 1))
  else
    path = "/log/tile/1/" .. index(math.random(0, math.floor(full / 256) - 1))
  end
  return wrk.format("GET", path)
end
