--- jaxlsp for Neovim >= 0.10: starts `jaxlsp serve` for Python buffers, keeps the "Trace graph"
--- lenses fresh, and adds :JaxTrace, :JaxGraph, :JaxOutline and :JaxNodeAt over the server's
--- custom requests (docs/lsp-extensions.md in the jaxlsp repository).
---
--- `require("jaxlsp").setup({})` is all it takes: nothing here relies on plugin/ or ftplugin/
--- scripts, so it works under `nvim -u NONE` too (with `:filetype on`).
local M = {}

M.name = "jaxlsp"

---@class jaxlsp.Config
M.defaults = {
  --- The server command; `jaxlsp` must be on PATH (a venv's bin, pipx, ...). A command that runs
  --- `python -m jaxlsp` gets `-I` (isolated mode); the server starts outside the workspace.
  cmd = { "jaxlsp", "serve" },
  --- Extra environment for the server process.
  cmd_env = nil,
  filetypes = { "python" },
  --- The workspace folder: the nearest ancestor with the first marker found, in this order.
  root_markers = { "jaxlsp.toml", "pyproject.toml", ".git" },
  --- Trust to run workspace code for tracing: false (the server asks on the first trace), true
  --- (every folder), a list of folders (those and the folders below them), or function(root) -> bool.
  trusted = false,
  --- The interpreter the capture runs in (default: the recipe's, the workspace .venv, the server's).
  python = nil,
  --- Seconds before a capture is killed.
  timeout = nil,
  --- Shapes at the end of assignment lines (`vim.lsp.inlay_hint.enable()` shows them).
  inlay_hints = false,
  --- Refresh lenses on open, on save, after indexing and after each trace.
  codelens = true,
  --- Send `jaxlsp/cursorMoved` on CursorHold, so an open graph view follows the cursor.
  cursor_sync = true,
  --- Create the :Jax* user commands.
  commands = true,
  --- Called as on_attach(client, bufnr) after the plugin's own attach work.
  on_attach = nil,
}

---@type jaxlsp.Config
M.config = vim.deepcopy(M.defaults)

--- What the plugin remembers: the last trace per document and overall, and how many
--- window/showDocument requests the server sent (so a reveal never jumps twice).
M.state = {
  last = nil, ---@type table|nil {traceId, name, uri, summary, client_id}
  by_uri = {}, ---@type table<string, table>
  shown = 0,
  opened = {}, ---@type string[] URLs opened in the browser
  cursor_sent = 0,
  traced = 0,
}

local has_011 = vim.fn.has("nvim-0.11") == 1

-- Client methods became `client:request(...)` in 0.11; 0.10 has `client.request(...)`.
local function request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end
M.request = request

local function notify_server(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function say(msg, level)
  vim.notify("jaxlsp: " .. msg, level or vim.log.levels.INFO)
end

local function warn(msg)
  say(msg, vim.log.levels.WARN)
end

local function err_text(err)
  if type(err) == "table" then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

local function normalize(path)
  return vim.fs.normalize(vim.fn.fnamemodify(path, ":p")):gsub("/$", "")
end

--- Whether the user trusts `root` to run its code (setup's `trusted`). Never true by default.
function M.is_trusted(root)
  local trusted = M.config.trusted
  if root == nil then
    return false
  end
  if type(trusted) == "function" then
    return trusted(root) == true
  end
  if trusted == true then
    return true
  end
  if type(trusted) == "table" then
    local here = normalize(root)
    for _, folder in ipairs(trusted) do
      local base = normalize(folder)
      if here == base or here:sub(1, #base + 1) == base .. "/" then
        return true
      end
    end
  end
  return false
end

--- `initializationOptions` for a client rooted at `root`.
function M.init_options(root)
  local opts = vim.empty_dict() -- an object on the wire even when nothing is set
  if M.is_trusted(root) then
    opts.trusted = true
  end
  if M.config.python then
    opts.python = M.config.python
  end
  if M.config.timeout then
    opts.timeout = M.config.timeout
  end
  if M.config.inlay_hints then
    opts.inlayHints = true
  end
  return { jaxlsp = opts }
end

--- The jaxlsp client attached to `bufnr` (default: current), or the first one running.
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  return clients[1]
end

local function client_or_warn(bufnr)
  local client = M.client(bufnr)
  if not client then
    warn("no jaxlsp client: open a Python file (is `" .. M.config.cmd[1] .. "` on PATH? :checkhealth jaxlsp)")
  end
  return client
end

local function refresh_lenses(bufnr)
  if not M.config.codelens then
    return
  end
  if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_buf_is_loaded(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

local function refresh_client_lenses(client)
  for bufnr in pairs(client.attached_buffers or {}) do
    refresh_lenses(bufnr)
  end
end

-- The server's own messages ------------------------------------------------------------------

--- window/showDocument: counted, so a reveal or open does not repeat what the server already did.
local function show_document(err, params, ctx, config)
  M.state.shown = M.state.shown + 1
  if params and params.external then
    local ok, why = M.open_url(params.uri)
    return { success = ok, error = not ok and { code = -32603, message = why } or nil }
  end
  local default = vim.lsp.handlers["window/showDocument"]
  return default(err, params, ctx, config)
end

-- A failure is reported by the trace request itself and marked by a diagnostic: only refresh.
local function trace_finished(_, _, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    refresh_client_lenses(client) -- Neovim advertises no codeLens refresh: ask again ourselves
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
    M.trace({ uri = arg.uri, name = arg.name, profile = arg.profile, bufnr = ctx.bufnr })
  end,
}

-- Attach ---------------------------------------------------------------------------------------

local function on_attach(client, bufnr)
  local group = vim.api.nvim_create_augroup("jaxlsp.buf." .. bufnr, { clear = true })
  if M.config.codelens then
    refresh_lenses(bufnr)
    vim.api.nvim_create_autocmd({ "BufEnter", "BufWritePost" }, {
      group = group,
      buffer = bufnr,
      callback = function()
        refresh_lenses(bufnr)
      end,
    })
  end
  if M.config.cursor_sync then
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
  if M.config.inlay_hints and vim.lsp.inlay_hint then
    pcall(vim.lsp.inlay_hint.enable, true, { bufnr = bufnr })
  end
  if M.config.on_attach then
    M.config.on_attach(client, bufnr)
  end
end

--- Send `jaxlsp/cursorMoved` when the cursor's position differs from `last` ("line:col").
function M.cursor_moved(bufnr, last, on_sent)
  local client = M.client(bufnr)
  if not client or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local key = params.position.line .. ":" .. params.position.character
  if key == last then
    return
  end
  notify_server(client, "jaxlsp/cursorMoved", { textDocument = params.textDocument, position = params.position })
  M.state.cursor_sent = M.state.cursor_sent + 1
  on_sent(key)
end

-- Indexing ends after the first lenses were asked for: ask again (no refresh request for Neovim).
local function on_progress(args)
  local client = vim.lsp.get_client_by_id(args.data and args.data.client_id or -1)
  local value = args.data and args.data.params and args.data.params.value
  if client and client.name == M.name and type(value) == "table" and value.kind == "end" then
    refresh_client_lenses(client)
  end
end

local launch = require("jaxlsp.launch")

local function root_of(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  return vim.fs.root(bufnr, M.config.root_markers) or vim.fs.dirname(name)
end

local function client_config()
  local cmd = launch.isolated(M.config.cmd)
  return {
    name = M.name,
    cmd = cmd,
    -- Never the workspace: Neovim would start the server in its own current folder otherwise.
    cmd_cwd = launch.cwd(nil),
    cmd_env = M.config.cmd_env,
    filetypes = M.config.filetypes,
    -- The folder a buffer belongs to; no client starts for it when the server command lies
    -- inside it and it is not trusted (0.11; `M.start` checks the same on 0.10).
    root_dir = function(bufnr, on_dir)
      local root = root_of(bufnr)
      if root and launch.may_start(cmd, root, M.is_trusted) then
        on_dir(root)
      end
    end,
    handlers = M.handlers,
    commands = M.commands,
    before_init = function(params, config)
      -- The root is known only now: trust and options follow the folder this client serves.
      local opts = M.init_options(config.root_dir)
      params.initializationOptions = opts
      config.init_options = opts
    end,
    on_attach = on_attach,
  }
end

--- Start (or reuse) the client for `bufnr`; how `setup()` attaches buffers on Neovim 0.10 and
--- the buffers that were already open before `setup()` on 0.11.
function M.start(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if vim.bo[bufnr].buftype ~= "" or not vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  local root = root_of(bufnr)
  if not root then
    return nil
  end
  local config = client_config()
  if not launch.may_start(config.cmd, root, M.is_trusted) then
    return nil
  end
  config.root_dir = root
  config.cmd_cwd = launch.cwd(root)
  return vim.lsp.start(config, { bufnr = bufnr })
end

-- Tracing --------------------------------------------------------------------------------------

--- :JaxTrace completion: the entrypoints of the current buffer (`jaxlsp/discover`, 1 s at most).
function M.complete_entrypoints(lead)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if not client then
    return {}
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }
  local answer
  if has_011 then
    answer = client:request_sync("jaxlsp/discover", params, 1000, bufnr)
  else
    answer = client.request_sync("jaxlsp/discover", params, 1000, bufnr)
  end
  local names = {}
  for _, e in ipairs(answer and answer.result and answer.result.entrypoints or {}) do
    if vim.startswith(e.name, lead or "") then
      table.insert(names, e.name)
    end
  end
  return names
end

--- The entrypoint around the cursor, from `jaxlsp/discover` (innermost body holding the line).
function M.entry_at_cursor(client, bufnr, on_done)
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  request(client, "jaxlsp/discover", { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, function(err, result)
    if err then
      return on_done(nil, err_text(err))
    end
    local best, names = nil, {}
    for _, e in ipairs(result and result.entrypoints or {}) do
      table.insert(names, e.name)
      local r = e.bodyRange
      if r.start.line <= line and line <= r["end"].line then
        if not best or e.range.start.line > best.range.start.line then
          best = e
        end
      end
    end
    if best then
      return on_done(best.name)
    end
    if #names == 0 then
      return on_done(nil, "no JAX entrypoint in this file")
    end
    vim.ui.select(names, { prompt = "jaxlsp: trace which entrypoint?" }, function(choice)
      on_done(choice, choice == nil and "cancelled" or nil)
    end)
  end, bufnr)
end

--- An answer typed for a needs-input item, as the server wants it: a dimension is an integer, a
--- shape a list (`3, 4`, `[3, 4]`, `batch 4`), anything else JSON.
function M.parse_answer(kind, text)
  text = vim.trim(text or "")
  if kind == "dimension" then
    local n = tonumber(text)
    if not n or n < 1 or n % 1 ~= 0 then
      return nil, "expected a positive integer, got " .. vim.inspect(text)
    end
    return math.floor(n)
  end
  if kind == "shape" then
    local shape = {}
    for part in text:gsub("^%[", ""):gsub("%]$", ""):gmatch("[^,%s]+") do
      local n = tonumber(part)
      table.insert(shape, n and math.floor(n) or part)
    end
    if #shape == 0 and text ~= "[]" then
      return nil, "expected a shape such as 3, 4 or [batch, 4]"
    end
    return shape
  end
  local ok, value = pcall(vim.json.decode, text)
  if not ok then
    return nil, "expected JSON (the TOML value as JSON), got " .. vim.inspect(text)
  end
  return value
end

--- Ask for every needs-input item with vim.ui.input, then whether to save the completed profile.
local function ask_inputs(name, result, on_done)
  local items = result.needsInput or {}
  local answers = {}
  local function ask(i)
    if i > #items then
      local choices = { "Trace only", "Trace and save to jaxlsp.toml" }
      return vim.ui.select(choices, { prompt = ("jaxlsp: save the profile for %s?"):format(name) }, function(c)
        if c == nil then
          return on_done(nil)
        end
        on_done(answers, c == choices[2])
      end)
    end
    local item = items[i]
    vim.ui.input({ prompt = ("jaxlsp: %s: "):format(item.message or item.path) }, function(text)
      if text == nil then
        return on_done(nil)
      end
      local value, why = M.parse_answer(item.kind, text)
      if value == nil then
        warn(("%s: %s"):format(item.path, why))
        return ask(i) -- ask the same item again
      end
      answers[item.path] = value
      ask(i + 1)
    end)
  end
  ask(1)
end

local function describe(result)
  local s = result.summary or {}
  local outs = table.concat(s.outputs or {}, ", ")
  return ("%s ops, %s groups → %s (profile %s)"):format(s.ops or "?", s.groups or "?", outs, result.profile or "-")
end

local function remember(client, uri, name, result)
  local entry = {
    traceId = result.traceId,
    name = name,
    uri = uri,
    summary = result.summary,
    client_id = client.id,
  }
  M.state.last = entry
  M.state.by_uri[uri] = entry
  M.state.traced = M.state.traced + 1
  vim.api.nvim_exec_autocmds("User", { pattern = "JaxlspTraced", data = vim.deepcopy(entry), modeline = false })
end

--- Trace an entrypoint through `jaxlsp/trace`: `opts = {name?, uri?, profile?, bufnr?}`; without
--- `name`, the entrypoint at the cursor. Missing inputs are asked with vim.ui.input.
--- `on_done(err, result)` gets the trace result or an error message.
function M.trace(opts, on_done)
  opts = opts or {}
  on_done = on_done or function() end
  local bufnr = (opts.bufnr == nil or opts.bufnr == 0) and vim.api.nvim_get_current_buf() or opts.bufnr
  local client = client_or_warn(bufnr)
  if not client then
    return on_done("no jaxlsp client")
  end
  local uri = opts.uri or vim.uri_from_bufnr(bufnr)

  local function send(name, extra)
    local params = { textDocument = { uri = uri }, name = name, profile = opts.profile }
    params = vim.tbl_extend("force", params, extra or {})
    say("tracing " .. name .. "…")
    request(client, "jaxlsp/trace", params, function(err, result)
      if err then
        warn(("tracing %s: %s"):format(name, err_text(err)))
        return on_done(err_text(err))
      end
      if result and result.needsInput then
        return ask_inputs(name, result, function(answers, save)
          if answers == nil then
            say("trace cancelled")
            return on_done("cancelled")
          end
          send(name, { answers = answers, save = save })
        end)
      end
      remember(client, uri, name, result)
      refresh_client_lenses(client)
      say(("traced %s: %s"):format(name, describe(result)))
      if type(result.saved) == "string" then
        say("saved the profile to " .. vim.uri_to_fname(result.saved))
      end
      on_done(nil, result)
    end, bufnr)
  end

  if opts.name then
    return send(opts.name)
  end
  M.entry_at_cursor(client, bufnr, function(name, why)
    if not name then
      warn(why)
      return on_done(why)
    end
    send(name)
  end)
end

--- The trace to show for `bufnr`: its own last trace, else the last one anywhere.
function M.current_trace(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local name = vim.api.nvim_buf_get_name(bufnr)
  return (name ~= "" and M.state.by_uri[vim.uri_from_fname(name)]) or M.state.last
end

-- Views ----------------------------------------------------------------------------------------

--- Open a URL in the browser (vim.ui.open, Neovim 0.10+). Returns ok, error.
function M.open_url(url)
  table.insert(M.state.opened, url)
  if not vim.ui.open then
    return false, "vim.ui.open needs Neovim 0.10"
  end
  local cmd, why = vim.ui.open(url)
  if not cmd then
    warn("could not open " .. url .. ": " .. tostring(why))
    return false, why
  end
  return true
end

--- `jaxlsp/openGraph` for the current trace, opened in the browser (once: the server may already
--- have asked with window/showDocument).
function M.open_graph(on_done)
  on_done = on_done or function() end
  local trace = M.current_trace(0)
  if not trace then
    warn("nothing traced yet: :JaxTrace first")
    return on_done("nothing traced")
  end
  local client = vim.lsp.get_client_by_id(trace.client_id) or client_or_warn(0)
  if not client then
    return on_done("no jaxlsp client")
  end
  local shown = M.state.shown
  request(client, "jaxlsp/openGraph", { traceId = trace.traceId }, function(err, result)
    if err then
      warn("open graph: " .. err_text(err))
      return on_done(err_text(err))
    end
    if M.state.shown == shown then
      M.open_url(result.url)
    end
    on_done(nil, result.url)
  end)
end

--- `jaxlsp/revealSource`, then jump to the location unless the server's showDocument already did.
function M.reveal(client, trace_id, node_id, on_done)
  on_done = on_done or function() end
  local shown = M.state.shown
  request(client, "jaxlsp/revealSource", { traceId = trace_id, nodeId = node_id }, function(err, result)
    if err then
      warn("reveal: " .. err_text(err))
      return on_done(err_text(err))
    end
    if M.state.shown == shown then
      local util = vim.lsp.util
      if util.show_document then
        util.show_document(result.location, client.offset_encoding, { reuse_win = true, focus = true })
      else
        util.jump_to_location(result.location, client.offset_encoding, true)
      end
    end
    on_done(nil, result.location)
  end)
end

--- `f32[3,4], f32[2,3]`: the types of a node's values, as `jaxlsp/node` and `jaxlsp/graph` give them.
function M.types_of(values)
  local out = {}
  for _, v in ipairs(values or {}) do
    table.insert(out, v.type)
  end
  return table.concat(out, ", ")
end
local types_of = M.types_of

--- One line per node: `n12 dot_general(f32[3,4], f32[2,3]) → f32[2,4]  scope`.
function M.node_line(node)
  local line = ("%s %s(%s) → %s"):format(node.id, node.primitive, types_of(node.inputs), types_of(node.outputs))
  if node.scope and node.scope ~= "" then
    line = line .. "  " .. node.scope
  end
  return line
end

--- `jaxlsp/nodesAt` at the cursor, then `jaxlsp/node` for each (at most `limit`, default 20).
--- `on_done(err, lines)`; the lines are also shown with vim.notify.
function M.node_at(on_done, limit)
  on_done = on_done or function() end
  limit = limit or 20
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_or_warn(bufnr)
  if not client then
    return on_done("no jaxlsp client")
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  request(client, "jaxlsp/nodesAt", params, function(err, found)
    if err then
      warn("nodes at cursor: " .. err_text(err))
      return on_done(err_text(err))
    end
    local ids = found and found.nodeIds or {}
    if found == nil or found.traceId == vim.NIL or found.traceId == nil or #ids == 0 then
      say("no traced operation on this line")
      return on_done(nil, {})
    end
    local shown = math.min(#ids, limit)
    local lines, pending = {}, shown
    for i = 1, shown do
      request(client, "jaxlsp/node", { traceId = found.traceId, nodeId = ids[i] }, function(e, node)
        lines[i] = e and (ids[i] .. ": " .. err_text(e)) or M.node_line(node)
        pending = pending - 1
        if pending == 0 then
          if #ids > shown then
            table.insert(lines, ("… %d more"):format(#ids - shown))
          end
          say(("trace %s, line %d:\n%s"):format(found.traceId, params.position.line + 1, table.concat(lines, "\n")))
          on_done(nil, lines)
        end
      end, bufnr)
    end
  end, bufnr)
end

function M.outline(opts, on_ready)
  return require("jaxlsp.outline").open(opts, on_ready)
end

-- Setup ----------------------------------------------------------------------------------------

local function create_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("JaxTrace", function(a)
    M.trace({ name = a.args ~= "" and a.args or nil })
  end, {
    nargs = "?",
    complete = M.complete_entrypoints,
    desc = "jaxlsp: trace the entrypoint at the cursor (or the named one)",
  })
  cmd("JaxGraph", function()
    M.open_graph()
  end, { desc = "jaxlsp: open the last trace's graph in the browser" })
  cmd("JaxOutline", function()
    M.outline()
  end, { desc = "jaxlsp: groups and nodes of the last trace, <CR> jumps to source" })
  cmd("JaxNodeAt", function()
    M.node_at()
  end, { desc = "jaxlsp: the traced operations on the cursor line, with shapes" })
end

--- Configure and start: a FileType autocmd for Python buffers (0.11: vim.lsp.config/enable), and
--- the Python buffers already open.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if vim.fn.has("nvim-0.10") ~= 1 then
    return warn("Neovim 0.10 or newer is required")
  end
  local group = vim.api.nvim_create_augroup("jaxlsp", { clear = true })
  vim.api.nvim_create_autocmd("LspProgress", { group = group, callback = on_progress })
  if has_011 then
    vim.lsp.config(M.name, client_config())
    vim.lsp.enable(M.name)
  else
    vim.api.nvim_create_autocmd("FileType", {
      group = group,
      pattern = M.config.filetypes,
      callback = function(args)
        M.start(args.buf)
      end,
    })
  end
  -- Buffers that got their filetype before setup(): 0.11's enable only revisits them after
  -- VimEnter, and 0.10 has no enable at all.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    local running = vim.lsp.get_clients({ name = M.name, bufnr = bufnr, _uninitialized = true })
    if vim.api.nvim_buf_is_loaded(bufnr) and #running == 0 then
      M.start(bufnr)
    end
  end
  if M.config.commands then
    create_commands()
  end
end

return M
