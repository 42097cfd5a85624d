--- jaxlsp for Neovim >= 0.10: starts `jaxlsp serve` for Python buffers, keeps the "Trace graph"
--- lenses fresh, and adds :JaxTrace, :JaxGraph, :JaxOutline and :JaxNodeAt over the server's
--- custom requests (docs/lsp-extensions.md in the jaxlsp repository).
---
--- `require("jaxlsp").setup({})` is all it takes: nothing here relies on plugin/ or ftplugin/
--- scripts, so it works under `nvim -u NONE` too (with `:filetype on`). On 0.11,
--- `vim.lsp.enable("jaxlsp")` alone works as well (lsp/jaxlsp.lua, with the defaults).
---
--- The parts, by concern: config.lua (settings, trust, initialization options), launch.lua (how
--- the server starts, so nothing of an untrusted folder runs), client.lua (the LSP client, its
--- handlers and attach), trace.lua (tracing and its questions), views.lua (browser, source,
--- nodes at the cursor), outline.lua (:JaxOutline), commands.lua, health.lua (:checkhealth).
local config = require("jaxlsp.config")
local rpc = require("jaxlsp.rpc")

local M = {}

M.name = rpc.name
M.defaults = config.defaults
---@type jaxlsp.Config
M.config = config.current
M.state = rpc.state

-- The Lua API (README "Use"), and the helpers outline.lua and scripts use.
M.request = rpc.request
M.client = rpc.client
M.is_trusted = config.is_trusted
M.init_options = config.init_options

function M.start(bufnr)
  return require("jaxlsp.client").start(bufnr)
end

function M.trace(opts, on_done)
  return require("jaxlsp.trace").trace(opts, on_done)
end

function M.current_trace(bufnr)
  return require("jaxlsp.trace").current_trace(bufnr)
end

function M.open_url(url)
  return require("jaxlsp.views").open_url(url)
end

function M.open_graph(on_done)
  return require("jaxlsp.views").open_graph(on_done)
end

function M.reveal(client, trace_id, node_id, on_done)
  return require("jaxlsp.views").reveal(client, trace_id, node_id, on_done)
end

function M.types_of(values)
  return require("jaxlsp.views").types_of(values)
end

function M.node_line(node)
  return require("jaxlsp.views").node_line(node)
end

function M.node_at(on_done, limit)
  return require("jaxlsp.views").node_at(on_done, limit)
end

function M.outline(opts, on_ready)
  return require("jaxlsp.outline").open(opts, on_ready)
end

--- Configure and start: a FileType autocmd for Python buffers (0.11: vim.lsp.config/enable), and
--- the Python buffers already open.
function M.setup(opts)
  M.config = config.set(opts)
  if vim.fn.has("nvim-0.10") ~= 1 then
    return rpc.warn("Neovim 0.10 or newer is required")
  end
  local client = require("jaxlsp.client")
  local group = vim.api.nvim_create_augroup("jaxlsp", { clear = true })
  client.watch_progress()
  if rpc.has_011 then
    vim.lsp.config(M.name, client.config())
    vim.lsp.enable(M.name)
  else
    vim.api.nvim_create_autocmd("FileType", {
      group = group,
      pattern = M.config.filetypes,
      callback = function(args)
        client.start(args.buf)
      end,
    })
  end
  -- Buffers that got their filetype before setup(): 0.11's enable only revisits them after
  -- VimEnter, and 0.10 has no enable at all.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    local running = vim.lsp.get_clients({ name = M.name, bufnr = bufnr, _uninitialized = true })
    if vim.api.nvim_buf_is_loaded(bufnr) and #running == 0 then
      client.start(bufnr)
    end
  end
  if M.config.commands then
    require("jaxlsp.commands").create()
  end
end

return M
