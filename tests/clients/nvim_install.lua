-- Drives the jaxlsp Neovim plugin as a new user installs it (issue 48): the plugin on the
-- runtimepath and Neovim 0.11's own `vim.lsp.config` / `vim.lsp.enable`, no setup().
--
-- Run as `nvim --headless -u NONE -i NONE -n -c 'luafile nvim_install.lua'` with JAXLSP_NVIM_CONFIG
-- naming a JSON file: {plugin, root, file, mode, cmd, report, failure}.
-- mode "missing": the server is not installed (not on PATH): one message names it and the command
--   that installs it, no client starts, and :checkhealth jaxlsp says the same.
-- mode "nojax": vim.lsp.config("jaxlsp", { cmd = cmd }) with an installed server, the folder
--   trusted "Always" (the server's per-user store), and its .venv without JAX: the client starts,
--   one message names the missing JAX and the install command, and :checkhealth jaxlsp says it.
-- vim.notify is recorded. Writes a JSON report; exits with `:qall!` on success, `:cquit 1` on failure.

local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "nvim_harness.lua"))
local cfg = H.cfg
local report = H.start({ mode = cfg.mode, steps = {}, notes = {} })
local step, wait_for, check = H.step, H.wait_for, H.check

vim.notify = function(msg, level)
  table.insert(report.notes, { msg = msg, level = level })
end

local function health()
  vim.cmd("checkhealth jaxlsp")
  report.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("bwipeout!")
end

local function begin()
  report.nvim = tostring(vim.version())
  vim.cmd("filetype on")
  vim.opt.runtimepath:append(cfg.plugin)
end

local function missing()
  begin()
  vim.lsp.enable("jaxlsp")
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local other = vim.fs.joinpath(vim.fs.dirname(cfg.file), "uni.py")
  vim.cmd.edit(vim.fn.fnameescape(other)) -- a second Python buffer: still one message
  vim.wait(H.ms(500), function()
    return false
  end, 50)
  report.clients = #vim.lsp.get_clients({ name = "jaxlsp", _uninitialized = true })
  step("opened")
  health()
  step("health")
end

local function nojax()
  begin()
  vim.lsp.config("jaxlsp", { cmd = cfg.cmd })
  vim.lsp.enable("jaxlsp")
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local bufnr = vim.api.nvim_get_current_buf()
  wait_for("the jaxlsp client", 60000, function()
    local c = vim.lsp.get_clients({ name = "jaxlsp", bufnr = bufnr })[1]
    return c ~= nil and c.initialized
  end)
  local client = vim.lsp.get_clients({ name = "jaxlsp", bufnr = bufnr })[1]
  report.cmd = client.config.cmd
  wait_for("the first-run message", 120000, function()
    for _, note in ipairs(report.notes) do
      if note.msg:find("cannot trace", 1, true) then
        return true
      end
    end
    return false
  end)
  step("first-run")
  health()
  step("health")
end

H.finish(({ missing = missing, nojax = nojax })[cfg.mode])
