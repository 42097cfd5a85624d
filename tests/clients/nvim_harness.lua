-- Shared by the headless Neovim drivers (neovim_trace.lua, nvim_plugin.lua): the config named by
-- JAXLSP_NVIM_CONFIG, the JSON report, bounded waits, and the ending: stop the clients, write the
-- report, exit with `:qall!` on success and `:cquit 1` (and the failure written) otherwise.
-- Load it with dofile from the driver's folder: `nvim -u NONE` has no runtimepath for it.

local uv = vim.uv or vim.loop
local H = {}

H.started = uv.hrtime()
-- Waits are deadlines in ms on the reference machine, times the factor the test measured when it
-- started this editor (tests/deadlines.py; run_editor puts it in JAXLSP_TEST_WAIT_FACTOR).
H.factor = tonumber(os.getenv("JAXLSP_TEST_WAIT_FACTOR") or "") or 1

--- `ms` of deadline on the reference machine, as long as this machine needs.
function H.ms(ms)
  return math.floor(ms * H.factor)
end
H.cfg = vim.json.decode(table.concat(vim.fn.readfile(assert(os.getenv("JAXLSP_NVIM_CONFIG"))), "\n"))
H.report = {}

--- Use `fields` as the report (`ok = false` until the driver's main returns); returns it.
function H.start(fields)
  H.report = fields
  H.report.ok = false
  return H.report
end

function H.step(name)
  table.insert(H.report.steps, { name = name, ms = math.floor((uv.hrtime() - H.started) / 1e6) })
end

--- Wait (bounded: `ms` on the reference machine, H.ms here) for `pred`; fail with `what` on timeout.
function H.wait_for(what, ms, pred)
  if not vim.wait(H.ms(ms), pred, 20) then
    error(("timed out after %d ms waiting for %s"):format(H.ms(ms), what), 0)
  end
end

function H.check(cond, message)
  if not cond then
    error(message, 0)
  end
end

--- Stop every client, forcing those that do not stop within 5 s.
function H.stop_clients()
  for _, c in ipairs(vim.lsp.get_clients()) do
    c:stop()
  end
  local stopped = vim.wait(H.ms(5000), function()
    for _, c in ipairs(vim.lsp.get_clients()) do
      if not c:is_stopped() then
        return false
      end
    end
    return true
  end, 50)
  if not stopped then
    for _, c in ipairs(vim.lsp.get_clients()) do
      c:stop(true)
    end
    vim.wait(H.ms(2000), function()
      return #vim.lsp.get_clients() == 0
    end, 50)
  end
  H.report.clients_stopped = stopped
end

--- Run `main`, then end the run whatever happened in it.
function H.finish(main)
  local ok, err = xpcall(main, function(e)
    return tostring(e) .. "\n" .. debug.traceback("", 2)
  end)
  H.report.ok = ok
  if not ok then
    H.report.error = err
  end
  H.stop_clients()
  H.step("stopped")
  H.report.elapsed_ms = math.floor((uv.hrtime() - H.started) / 1e6)
  local encoded, text = pcall(vim.json.encode, H.report)
  if not encoded then
    text = vim.json.encode({ ok = false, error = "report not encodable: " .. tostring(text) })
  end
  vim.fn.writefile({ text }, H.cfg.report)
  if ok then
    vim.cmd("qall!")
  else
    vim.fn.writefile(vim.split(err, "\n"), H.cfg.failure)
    vim.cmd("cquit 1")
  end
end

return H
