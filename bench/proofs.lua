-- wrk: each request proves a random case of the bench report (path prefix from the env).
local prefix = os.getenv("PROOF_PREFIX")
local checks, examples, repeats = 20, 10000, 5
math.randomseed(os.time())
request = function()
  local path = string.format("%s/c%02d/ex%05d/%d", prefix, math.random(0, checks - 1),
    math.random(0, examples - 1), math.random(0, repeats - 1))
  return wrk.format("GET", path)
end
