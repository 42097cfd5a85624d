--- :checkhealth jaxlsp: the Neovim version, the server command (and how to install it when it is
--- missing), trust, the running clients and, in a trusted folder, whether the capture interpreter
--- can trace (and the command that fixes it when it cannot).
local M = {}

function M.check()
  local health = vim.health
  local jaxlsp = require("jaxlsp")
  local config = jaxlsp.config
  health.start("jaxlsp")

  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is required, found " .. tostring(vim.version()))
  end

  local cmd = require("jaxlsp.client").effective_cmd(config.cmd)
  local exe = cmd[1]
  if vim.fn.executable(exe) == 1 then
    local found = vim.fn.exepath(exe)
    local out = vim.fn.system({ found, "--version" })
    if vim.v.shell_error == 0 then
      health.ok(("server: %s (%s)"):format(found, vim.trim(out)))
    else
      health.warn(("server: %s does not answer --version: %s"):format(found, vim.trim(out)))
    end
  else
    health.error(("server: `%s` is not on PATH"):format(exe), {
      "install it into its own environment: " .. require("jaxlsp.firstrun").INSTALL .. " (Python >= 3.11);",
      "your project's environment needs only JAX (and Flax or Equinox), not jaxlsp;",
      "or name an installed one: vim.lsp.config('jaxlsp', { cmd = { '/path/to/jaxlsp', 'serve' } })",
    })
  end

  if vim.fn.exists("#filetypedetect") == 0 then
    health.warn("filetype detection is off, so no buffer is Python: run :filetype on")
  end

  local trusted = config.trusted
  if trusted == false or trusted == nil then
    health.info("trust: the server asks before the first trace in each folder")
  elseif trusted == true then
    health.warn("trust: every folder is trusted to run its code (setup({ trusted = true }))")
  else
    local which = type(trusted) == "function" and "decided by your function" or table.concat(trusted, ", ")
    health.info("trust: " .. which)
  end

  for root, program in pairs(require("jaxlsp.launch").refused) do
    health.warn(("not started for %s: %s lies inside it and it is not trusted"):format(root, program))
  end

  local clients = vim.lsp.get_clients({ name = jaxlsp.name })
  if #clients == 0 then
    health.info("no jaxlsp client running (open a Python file)")
  end
  for _, client in ipairs(clients) do
    local opts = (client.config.init_options or {}).jaxlsp or {}
    health.ok(("client %d: root %s, encoding %s, trusted %s"):format(
      client.id,
      client.root_dir or "(none)",
      client.offset_encoding,
      tostring(opts.trusted == true)
    ))
    M.check_capture(health, client)
  end
  local last = jaxlsp.state.last
  if last then
    health.info(("last trace: %s (%s)"):format(last.name, last.traceId))
  end
end

--- The capture interpreter the server picked for the client's folder: asked only when the folder
--- is trusted (the check runs that interpreter).
function M.check_capture(health, client)
  local firstrun = require("jaxlsp.firstrun")
  if not firstrun.trusted(client) then
    health.info("capture environment: checked once the folder is trusted (the check runs its interpreter)")
    return
  end
  local rpc = require("jaxlsp.rpc")
  local answer = rpc.request_sync(client, "jaxlsp/environment", vim.empty_dict(), 60000)
  local result = answer and answer.result
  if type(result) ~= "table" then
    health.warn("capture environment: no answer (" .. rpc.err_text(answer and answer.err or "timeout") .. ")")
  elseif result.ok then
    health.ok("capture environment: " .. result.message)
  else
    local advice = { "install what is missing into that interpreter (not into jaxlsp's own)" }
    if type(result.install) == "string" and result.install ~= "" then
      advice = { "run: " .. result.install }
    end
    health.error("capture environment: " .. result.message, advice)
  end
end

return M
