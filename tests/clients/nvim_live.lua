-- Live shapes through the jaxlsp Neovim plugin (editors/nvim), headless, against the real server.
--
-- Run as `nvim --headless -u NONE -i NONE -n -c 'luafile nvim_live.lua'` with JAXLSP_NVIM_CONFIG
-- naming a JSON file: {plugin, root, file, report, failure, hover_line, width_line}.
-- setup({trusted = {root}}) with live shapes on (the default), open model.py, and without any
-- trace command: hover shows the shapes; break a shape and :write: the diagnostic appears at the
-- failing line; restore the line and :write: it goes. Writes a JSON report.

local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "nvim_harness.lua"))
local cfg = H.cfg
local report = H.start({ steps = {} })
local step, wait_for, check = H.step, H.wait_for, H.check

local function hover_text(bufnr, line)
  local client = vim.lsp.get_clients({ name = "jaxlsp", bufnr = bufnr })[1]
  local result
  client:request("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = line, character = 8 },
  }, function(_, res)
    result = res or false
  end, bufnr)
  wait_for("a hover answer", 10000, function()
    return result ~= nil
  end)
  return result and result.contents and result.contents.value or ""
end

local function jaxlsp_diagnostics(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "jaxlsp" then
      table.insert(out, { line = d.lnum, message = d.message, code = d.code })
    end
  end
  return out
end

H.finish(function()
  vim.opt.runtimepath:prepend(cfg.plugin)
  vim.cmd("filetype on")
  require("jaxlsp").setup({ trusted = { cfg.root } })
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local bufnr = vim.api.nvim_get_current_buf()
  wait_for("the jaxlsp client", 15000, function()
    return vim.lsp.get_clients({ name = "jaxlsp", bufnr = bufnr })[1] ~= nil
  end)
  step("attached")
  -- No trace command: the live trace after the open is what puts shapes on hover.
  wait_for("shapes on hover without a click", 120000, function()
    return hover_text(bufnr, cfg.hover_line):find("f32[4,16]", 1, true) ~= nil
  end)
  report.hover = hover_text(bufnr, cfg.hover_line)
  step("hover")

  local good = vim.api.nvim_buf_get_lines(bufnr, cfg.width_line, cfg.width_line + 1, false)[1]
  vim.api.nvim_buf_set_lines(bufnr, cfg.width_line, cfg.width_line + 1, false,
    { (good:gsub("x%.shape%[%-1%], WIDTH", "x.shape[-1] + 1, WIDTH")) })
  vim.cmd("silent write")
  wait_for("the diagnostic of the broken shape", 120000, function()
    return #jaxlsp_diagnostics(bufnr) > 0
  end)
  report.broken = jaxlsp_diagnostics(bufnr)
  step("broken")

  vim.api.nvim_buf_set_lines(bufnr, cfg.width_line, cfg.width_line + 1, false, { good })
  vim.cmd("silent write")
  wait_for("the diagnostic to go", 120000, function()
    return #jaxlsp_diagnostics(bufnr) == 0
  end)
  report.fixed = jaxlsp_diagnostics(bufnr)
  step("fixed")
end)
