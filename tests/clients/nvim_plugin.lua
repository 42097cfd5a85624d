-- Drives the jaxlsp Neovim plugin (editors/nvim) headless against the real server.
--
-- Run as `nvim --headless -u NONE -i NONE -n -c 'luafile nvim_plugin.lua'` with JAXLSP_NVIM_CONFIG
-- naming a JSON file: {plugin, root, file, mode, report, failure, predict_def_line, needs_line}.
-- mode "full": setup({trusted = {root}}) before opening model.py; the plugin's lens refresh, the
-- lens run (its client-side command), :JaxOutline (expand the jit group, <CR> on dot_general),
-- hover, :JaxNodeAt, :JaxGraph, :JaxTrace on an entrypoint that needs input, :checkhealth.
-- mode "trust": model.py open before setup({}); the trace asks for trust and "Cancel" runs nothing.
-- mode "hostile": a workspace that shadows the server's modules and holds a recording .venv.
-- mode "enable": no setup() at all, only vim.lsp.enable("jaxlsp") (lsp/jaxlsp.lua).
-- Only the user's side is stubbed: vim.ui.select / vim.ui.input answer as a user would, and
-- vim.ui.open records the URL instead of starting a browser. Writes a JSON report; exits with
-- `:qall!` on success and `:cquit 1` on failure, after stopping the clients.

local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "nvim_harness.lua"))
local cfg = H.cfg
local report = H.start({ mode = cfg.mode, steps = {}, selects = {}, inputs = {}, opened = {}, notes = {} })
local step, wait_for, check = H.step, H.wait_for, H.check

-- The user's side ------------------------------------------------------------------------------
local answers = { select = {}, input = {} } -- queued answers, by prompt pattern

vim.ui.select = function(items, opts, on_choice)
  local titles = {}
  for _, item in ipairs(items) do
    table.insert(titles, type(item) == "table" and item.title or item)
  end
  table.insert(report.selects, { prompt = opts.prompt, items = titles })
  for i, item in ipairs(items) do
    local want = answers.select[opts.prompt and opts.prompt:match("^jaxlsp: save") and "save" or "trust"]
    if want and titles[i] == want then
      return on_choice(item, i)
    end
  end
  on_choice(nil, nil)
end

vim.ui.input = function(opts, on_confirm)
  table.insert(report.inputs, opts.prompt)
  on_confirm(table.remove(answers.input, 1))
end

vim.ui.open = function(url)
  table.insert(report.opened, url)
  return {
    wait = function()
      return { code = 0 }
    end,
  }
end

vim.notify = function(msg, level)
  table.insert(report.notes, { msg = msg, level = level })
end

local function cursor_line()
  return vim.api.nvim_win_get_cursor(0)[1] - 1
end

--- Run the plugin's async function `fn(on_done)`; wait for on_done and return its (err, value).
local function await(what, ms, fn)
  local done, e, v = false, nil, nil
  fn(function(err, value)
    done, e, v = true, err, value
  end)
  wait_for(what, ms, function()
    return done
  end)
  return e, v
end

local function lens_snapshot(bufnr)
  local out = {}
  for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
    table.insert(out, {
      line = lens.range.start.line,
      title = lens.command and lens.command.title or vim.NIL,
      command = lens.command and lens.command.command or vim.NIL,
    })
  end
  return out
end

local function lens_on(bufnr, line, prefix)
  for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
    if lens.range.start.line == line and lens.command and lens.command.title:sub(1, #prefix) == prefix then
      return lens
    end
  end
end

local function attached_client(bufnr)
  return vim.lsp.get_clients({ name = "jaxlsp", bufnr = bufnr })[1]
end

local function start_common()
  report.nvim = tostring(vim.version())
  vim.lsp.set_log_level("debug")
  report.lsp_log = vim.lsp.get_log_path()
  vim.opt.runtimepath:prepend(cfg.plugin)
  vim.cmd("filetype on")
end

local function record_client(client)
  report.cmd = client.config.cmd
  report.init_options = client.config.init_options or vim.NIL
  report.root_dir = client.root_dir
  report.offset_encoding = client.offset_encoding
end

-- mode "full" ----------------------------------------------------------------------------------
local function full()
  start_common()
  local jaxlsp = require("jaxlsp")
  jaxlsp.setup({ trusted = { cfg.root }, live_shapes = false }) -- explicit traces only (live traces on open)
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local bufnr = vim.api.nvim_get_current_buf()
  check(vim.bo[bufnr].filetype == "python", "filetype: " .. vim.bo[bufnr].filetype)

  wait_for("the jaxlsp client to attach (started by setup's FileType autocmd)", 15000, function()
    local c = attached_client(bufnr)
    return c ~= nil and c.initialized
  end)
  local client = attached_client(bufnr)
  record_client(client)
  step("attached")

  -- The plugin refreshes lenses itself (on attach and when indexing ends): only wait here.
  local waited = vim.wait(H.ms(20000), function()
    return lens_on(bufnr, cfg.predict_def_line, "Trace graph") ~= nil
  end, 20)
  report.lenses = lens_snapshot(bufnr)
  check(waited, "no resolved Trace graph lens on the predict line")
  step("lenses")
  report.completion = vim.fn.getcompletion("JaxTrace ", "cmdline")
  report.learn_command = vim.api.nvim_get_commands({}).JaxLearn ~= nil -- :JaxLearn (jaxlsp.learnShapes)

  -- Run the lens as a user would: cursor on the def line, vim.lsp.codelens.run().
  vim.api.nvim_win_set_cursor(0, { cfg.predict_def_line + 1, 0 })
  local traced = jaxlsp.state.traced
  vim.lsp.codelens.run()
  wait_for("the lens's trace (JaxlspTraced)", 90000, function()
    return jaxlsp.state.traced > traced
  end)
  report.trace = jaxlsp.state.last
  step("traced")

  -- After the trace the plugin asks for lenses again: the title carries the figures.
  local refreshed = vim.wait(H.ms(10000), function()
    local lens = lens_on(bufnr, cfg.predict_def_line, "Trace graph ·")
    -- and the traced entrypoint's other lenses, "Open graph" and "Trace with values", resolved too
    return lens ~= nil and lens.command.title:find("ops", 1, true) ~= nil
      and lens_on(bufnr, cfg.predict_def_line, "Open graph") ~= nil
      and lens_on(bufnr, cfg.predict_def_line, "Trace with values") ~= nil
  end, 20)
  report.lenses_after = lens_snapshot(bufnr)
  check(refreshed, "the lens title did not follow the trace")
  step("lenses refreshed")

  -- :JaxOutline: the top level, then expand the jit group with <CR>.
  local source_win = vim.api.nvim_get_current_win()
  vim.cmd("JaxOutline")
  local outline = vim.api.nvim_get_current_buf()
  report.outline_filetype = vim.bo[outline].filetype
  local function lines()
    return vim.api.nvim_buf_get_lines(outline, 0, -1, false)
  end
  local function find(pattern)
    for i, l in ipairs(lines()) do
      if l:find(pattern) then
        return i
      end
    end
  end
  wait_for("the outline's top level", 10000, function()
    return find("^▸ jit") ~= nil
  end)
  report.outline_top = lines()
  vim.api.nvim_win_set_cursor(0, { find("^▸ jit"), 0 })
  vim.api.nvim_feedkeys(vim.keycode("<CR>"), "x", false)
  wait_for("the expanded jit group", 10000, function()
    return find("dot_general") ~= nil
  end)
  report.outline_expanded = lines()
  step("outline")

  -- <CR> on the dot_general node: revealSource, and the cursor lands on its line in model.py.
  local node_line = find("dot_general")
  local view = require("jaxlsp.outline").views[outline]
  local node = view.lines[node_line].item
  report.node = { id = node.id, source = node.source, outputs = node.outputs }
  local shown = jaxlsp.state.shown
  vim.api.nvim_win_set_cursor(0, { node_line, 0 })
  vim.api.nvim_feedkeys(vim.keycode("<CR>"), "x", false)
  wait_for("the reveal to land in model.py", 10000, function()
    return vim.api.nvim_get_current_buf() == bufnr and cursor_line() == node.source.line - 1
  end)
  report.reveal = {
    line = cursor_line() + 1,
    window_is_source = vim.api.nvim_get_current_win() == source_win,
    show_documents = jaxlsp.state.shown - shown,
    outline_open = vim.api.nvim_buf_is_valid(outline) and #vim.fn.win_findbuf(outline) > 0,
  }
  step("revealed")

  -- Hover on the revealed line (Neovim's own hover request; the plugin adds nothing there).
  local results = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", function(c)
    return vim.lsp.util.make_position_params(0, c.offset_encoding)
  end, 10000)
  local hover = results and results[client.id] and results[client.id].result
  check(hover and hover.contents, "no hover on the revealed line")
  report.hover = hover.contents.value or vim.inspect(hover.contents)
  step("hover")

  -- :JaxNodeAt on the same line prints each node with its shapes.
  local notes = #report.notes
  vim.cmd("JaxNodeAt")
  wait_for(":JaxNodeAt's answer", 10000, function()
    for i = notes + 1, #report.notes do
      if report.notes[i].msg:find("trace ", 1, true) then
        report.node_at = report.notes[i].msg
        return true
      end
    end
    return false
  end)
  step("node at")

  -- CursorHold sends jaxlsp/cursorMoved once per position.
  local sent = jaxlsp.state.cursor_sent
  vim.api.nvim_exec_autocmds("CursorHold", { buffer = bufnr })
  vim.api.nvim_exec_autocmds("CursorHold", { buffer = bufnr })
  report.cursor_moved = jaxlsp.state.cursor_sent - sent

  -- :JaxGraph: one browser open, whether the server's showDocument or the plugin did it.
  local opened = #report.opened
  local err = await("openGraph", 10000, function(done)
    jaxlsp.open_graph(done)
  end)
  check(err == nil, "open graph: " .. tostring(err))
  report.graph_opens = vim.list_slice(report.opened, opened + 1)
  step("graph")

  -- :JaxTrace on an entrypoint that needs input: asked with vim.ui.input, then whether to save;
  -- "1.5" is refused by the server (it parses the typed text) and asked again with its message.
  answers.input = { "1.5", "3" }
  answers.select.save = "Trace and save to jaxlsp.toml"
  vim.api.nvim_win_set_cursor(0, { cfg.needs_line + 1, 4 })
  traced = jaxlsp.state.traced
  local before = #report.notes
  vim.cmd("JaxTrace")
  local finished = vim.wait(H.ms(60000), function()
    if jaxlsp.state.traced > traced then
      return true
    end
    for i = before + 1, #report.notes do
      if report.notes[i].level == vim.log.levels.WARN and report.notes[i].msg:match("^jaxlsp: tracing") then
        return true
      end
    end
    return false
  end, 20)
  report.needs_trace = jaxlsp.state.traced > traced and jaxlsp.state.last or vim.NIL
  report.needs_notes = vim.list_slice(report.notes, before + 1)
  check(finished, ":JaxTrace on needs neither traced nor warned")
  step("needs input")

  -- :checkhealth jaxlsp (health.lua on the runtimepath).
  vim.cmd("checkhealth jaxlsp")
  report.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  step("health")
end

-- mode "trust" ---------------------------------------------------------------------------------
local function trust()
  start_common()
  vim.cmd.edit(vim.fn.fnameescape(cfg.file)) -- already Python when setup() runs
  local bufnr = vim.api.nvim_get_current_buf()
  local jaxlsp = require("jaxlsp")
  jaxlsp.setup({})
  wait_for("the jaxlsp client for the buffer open before setup()", 15000, function()
    local c = attached_client(bufnr)
    return c ~= nil and c.initialized
  end)
  record_client(attached_client(bufnr))
  step("attached")
  answers.select.trust = "Cancel"
  local err = await("the refused trace", 30000, function(done)
    jaxlsp.trace({ name = "predict" }, done)
  end)
  report.trace_error = err
  step("refused")
end

--- Wait for the jaxlsp client of `bufnr` (`what` started it) and for its "Trace graph" lens on
--- predict; the client, and whether the lens showed (both recorded in the report).
local function attached_with_lens(bufnr, what)
  wait_for("the jaxlsp client (" .. what .. ")", 15000, function()
    local c = attached_client(bufnr)
    return c ~= nil and c.initialized
  end)
  local client = attached_client(bufnr)
  record_client(client)
  report.cmd_cwd = client.config.cmd_cwd
  local waited = vim.wait(H.ms(20000), function()
    return lens_on(bufnr, cfg.predict_def_line, "Trace graph") ~= nil
  end, 20)
  report.lenses = lens_snapshot(bufnr)
  return client, waited
end

-- mode "hostile" -------------------------------------------------------------------------------
-- The workspace shadows the server's imports and holds a .venv that records being run (the test
-- made it so). A user command `python -m jaxlsp serve` starts isolated, outside the folder: the
-- lens appears and nothing of the folder runs; a command inside the untrusted folder is refused.
local function hostile()
  start_common()
  local jaxlsp = require("jaxlsp")
  jaxlsp.setup({ cmd = { cfg.python, "-m", "jaxlsp", "serve" } })
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local client, waited = attached_with_lens(vim.api.nvim_get_current_buf(), "python -m jaxlsp serve, made isolated")
  check(waited, "no Trace graph lens in the hostile workspace")
  step("isolated server")
  client:stop(true)
  wait_for("the first client to stop", 10000, function()
    return #vim.lsp.get_clients({ name = "jaxlsp" }) == 0
  end)

  -- The workspace's own jaxlsp script: setup() revisits the open buffer (the 0.10 path), and a
  -- newly opened file goes through 0.11's root_dir; neither starts it.
  jaxlsp.setup({ cmd = { cfg.root .. "/.venv/bin/jaxlsp", "serve" } })
  vim.cmd.edit(vim.fn.fnameescape(cfg.root .. "/other.py"))
  report.refused = require("jaxlsp.launch").refused
  report.clients_after = #vim.lsp.get_clients({ name = "jaxlsp", _uninitialized = true })
  step("refused")
end

-- mode "enable" --------------------------------------------------------------------------------
-- Neovim 0.11's own way, with no setup(): the plugin on the runtimepath, vim.lsp.enable("jaxlsp").
local function enable()
  start_common()
  vim.lsp.enable("jaxlsp")
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local _, waited = attached_with_lens(vim.api.nvim_get_current_buf(), "lsp/jaxlsp.lua, vim.lsp.enable")
  check(waited, "no Trace graph lens (the plugin refreshes them on attach)")
  report.commands = vim.fn.exists(":JaxTrace") == 2 and vim.fn.exists(":JaxOutline") == 2
  step("enabled")
end

local modes = { full = full, trust = trust, hostile = hostile, enable = enable }
H.finish(modes[cfg.mode])
