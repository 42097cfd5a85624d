--- The LSP client: how it starts (launch.lua decides the command, folder and trust gate), the
--- server's own messages it handles (showDocument, traceFinished), the client-side command the
--- "Trace graph" lens runs, and what happens on attach (lens refresh, cursor sync, inlay hints).
local M = {}

local config = require("jaxlsp.config")
local launch = require("jaxlsp.launch")
local rpc = require("jaxlsp.rpc")

local function refresh_lenses(bufnr)
  if not config.current.codelens then
    return
  end
  if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_buf_is_loaded(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- Ask again for the lenses of every buffer `client` serves (Neovim advertises no codeLens refresh).
function M.refresh_lenses(client)
  for bufnr in pairs(client.attached_buffers or {}) do
    refresh_lenses(bufnr)
  end
end

-- The server's own messages ------------------------------------------------------------------

--- window/showDocument: counted, so a reveal or open does not repeat what the server already did.
local function show_document(err, params, ctx, handler_config)
  rpc.state.shown = rpc.state.shown + 1
  if params and params.external then
    local ok, why = require("jaxlsp.views").open_url(params.uri)
    return { success = ok, error = not ok and { code = -32603, message = why } or nil }
  end
  local default = vim.lsp.handlers["window/showDocument"]
  return default(err, params, ctx, handler_config)
end

-- A failure is reported by the trace request itself and marked by a diagnostic: only refresh.
local function trace_finished(_, _, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    M.refresh_lenses(client)
  end
end

M.handlers = {
  ["window/showDocument"] = show_document,
  ["jaxlsp/traceFinished"] = trace_finished,
}

--- Client-side commands: a lens or code action runs the plugin's trace (with its prompts).
M.commands = {
  ["jaxlsp.traceGraph"] = function(command, ctx)
    local arg = (command.arguments or {})[1] or {}
    require("jaxlsp.trace").trace({ uri = arg.uri, name = arg.name, profile = arg.profile, bufnr = ctx.bufnr })
  end,
}

-- Attach ---------------------------------------------------------------------------------------

--- Send `jaxlsp/cursorMoved` when the cursor's position differs from `last` ("line:col").
function M.cursor_moved(bufnr, last, on_sent)
  local client = rpc.client(bufnr)
  if not client or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local key = params.position.line .. ":" .. params.position.character
  if key == last then
    return
  end
  rpc.notify(client, "jaxlsp/cursorMoved", { textDocument = params.textDocument, position = params.position })
  rpc.state.cursor_sent = rpc.state.cursor_sent + 1
  on_sent(key)
end

local function on_attach(client, bufnr)
  local opts = config.current
  local group = vim.api.nvim_create_augroup("jaxlsp.buf." .. bufnr, { clear = true })
  if opts.codelens then
    refresh_lenses(bufnr)
    vim.api.nvim_create_autocmd({ "BufEnter", "BufWritePost" }, {
      group = group,
      buffer = bufnr,
      callback = function()
        refresh_lenses(bufnr)
      end,
    })
  end
  if opts.cursor_sync then
    local last
    vim.api.nvim_create_autocmd("CursorHold", {
      group = group,
      buffer = bufnr,
      callback = function()
        M.cursor_moved(bufnr, last, function(sent)
          last = sent
        end)
      end,
    })
  end
  if opts.inlay_hints and vim.lsp.inlay_hint then
    pcall(vim.lsp.inlay_hint.enable, true, { bufnr = bufnr })
  end
  -- Started by `vim.lsp.enable("jaxlsp")` alone (lsp/jaxlsp.lua), setup() never ran: the
  -- commands and the lens refresh after indexing come with the first attach.
  if opts.commands then
    require("jaxlsp.commands").create()
  end
  M.watch_progress()
  require("jaxlsp.firstrun").check_capture(client, bufnr)
  if opts.on_attach then
    opts.on_attach(client, bufnr)
  end
end

-- Indexing ends after the first lenses were asked for: ask again (no refresh request for Neovim).
function M.on_progress(args)
  local client = vim.lsp.get_client_by_id(args.data and args.data.client_id or -1)
  local value = args.data and args.data.params and args.data.params.value
  if client and client.name == rpc.name and type(value) == "table" and value.kind == "end" then
    M.refresh_lenses(client)
  end
end

local watching = false

--- The LspProgress autocmd behind `on_progress`, once.
function M.watch_progress()
  if watching then
    return
  end
  watching = true
  local group = vim.api.nvim_create_augroup("jaxlsp.progress", { clear = true })
  vim.api.nvim_create_autocmd("LspProgress", { group = group, callback = M.on_progress })
end

-- Start ----------------------------------------------------------------------------------------

function M.root_of(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  return vim.fs.root(bufnr, config.current.root_markers) or vim.fs.dirname(name)
end

--- The command Neovim 0.11 will run: `vim.lsp.config("jaxlsp", { cmd = ... })` over the plugin's
--- (a table only; a function command is the user's own), else `default`.
function M.effective_cmd(default)
  if not rpc.has_011 then
    return default
  end
  local ok, resolved = pcall(function()
    return vim.lsp.config[rpc.name]
  end)
  local cmd = ok and type(resolved) == "table" and resolved.cmd or nil
  return type(cmd) == "table" and cmd or default
end

--- The client's configuration, for `vim.lsp.config` (0.11, and lsp/jaxlsp.lua) or `vim.lsp.start`.
function M.config()
  local opts = config.current
  local cmd = launch.isolated(opts.cmd)
  -- Neovim 0.11's vim.lsp.enable passes over a command that is not executable with a line in its
  -- log only: say it once, with the install command (firstrun.lua).
  vim.schedule(function()
    require("jaxlsp.firstrun").server_missing(M.effective_cmd(cmd))
  end)
  return {
    name = rpc.name,
    cmd = cmd,
    -- Never the workspace: Neovim would start the server in its own current folder otherwise.
    cmd_cwd = launch.cwd(nil),
    cmd_env = opts.cmd_env,
    filetypes = opts.filetypes,
    -- The folder a buffer belongs to; no client starts for it when the server command lies
    -- inside it and it is not trusted (0.11; `M.start` checks the same on 0.10).
    root_dir = function(bufnr, on_dir)
      local root = M.root_of(bufnr)
      local run = M.effective_cmd(cmd)
      if root and not require("jaxlsp.firstrun").server_missing(run) and launch.may_start(run, root, config.is_trusted) then
        on_dir(root)
      end
    end,
    handlers = M.handlers,
    commands = M.commands,
    before_init = function(params, client_config)
      -- The root is known only now: trust and options follow the folder this client serves.
      local init = config.init_options(client_config.root_dir)
      params.initializationOptions = init
      client_config.init_options = init
    end,
    on_attach = on_attach,
  }
end

--- Start (or reuse) the client for `bufnr`; how `setup()` attaches buffers on Neovim 0.10 and
--- the buffers that were already open before `setup()` on 0.11.
function M.start(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if vim.bo[bufnr].buftype ~= "" or not vim.tbl_contains(config.current.filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  local root = M.root_of(bufnr)
  if not root then
    return nil
  end
  local client_config = M.config()
  if require("jaxlsp.firstrun").server_missing(client_config.cmd) then
    return nil
  end
  if not launch.may_start(client_config.cmd, root, config.is_trusted) then
    return nil
  end
  client_config.root_dir = root
  client_config.cmd_cwd = launch.cwd(root)
  return vim.lsp.start(client_config, { bufnr = bufnr })
end

return M
