--- :checkhealth jaxlsp: the Neovim version, the server command, trust and the running clients.
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

  local exe = config.cmd[1]
  if vim.fn.executable(exe) == 1 then
    local found = vim.fn.exepath(exe)
    local out = vim.fn.system({ found, "--version" })
    if vim.v.shell_error == 0 then
      health.ok(("server: %s (%s)"):format(found, vim.trim(out)))
    else
      health.warn(("server: %s does not answer --version: %s"):format(found, vim.trim(out)))
    end
  else
    health.error(("`%s` is not on PATH"):format(exe), {
      "pip install jaxlsp into a Python >= 3.11 environment and put its bin/ on PATH,",
      "or setup({ cmd = { '/path/to/venv/bin/jaxlsp', 'serve' } })",
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
  end
  local last = jaxlsp.state.last
  if last then
    health.info(("last trace: %s (%s)"):format(last.name, last.traceId))
  end
end

return M
