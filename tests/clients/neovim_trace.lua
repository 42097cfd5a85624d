-- Acceptance script for headless Neovim 0.11 against the real jaxlsp server.
--
-- Run as `nvim --headless -u NONE -i NONE -n -c 'luafile neovim_trace.lua'` with
-- JAXLSP_NVIM_CONFIG naming a JSON file: {python, root, file, report, failure, xdg: {state, config, cache}}.
-- Steps: start the client (trust from initializationOptions), wait for the resolved "Trace graph"
-- lens on `predict`, run its command through the client, page the graph, hover on line 12.
-- Writes a JSON report; exits with `:qall!` on success and `:cquit 1` on failure, after stopping
-- the client.

local uv = vim.uv or vim.loop
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "nvim_harness.lua"))
local cfg = H.cfg
local report = H.start({ steps = {}, prompts = {}, messages = {} })
local client -- vim.lsp.Client
local step, wait_for, check = H.step, H.wait_for, H.check

--- A request through the client, waited for (bounded); fails on an LSP error.
local function request(method, params, ms, bufnr)
  local done, err, result = false, nil, nil
  local ok = client:request(method, params, function(e, r)
    done, err, result = true, e, r
  end, bufnr)
  if not ok then
    error(method .. ": the client refused to send the request", 0)
  end
  wait_for(method, ms, function()
    return done
  end)
  if err then
    error(("%s failed: %s"):format(method, vim.inspect(err)), 0)
  end
  return result
end

local function main()
  report.nvim = tostring(vim.version())
  check(vim.fn.has("nvim-0.11") == 1, "Neovim 0.11+ is required, got " .. report.nvim)

  -- Keep Neovim's own state (lsp.log) and the server's trust store and cache out of the user's home.
  local env = { XDG_STATE_HOME = cfg.xdg.state, XDG_CONFIG_HOME = cfg.xdg.config, XDG_CACHE_HOME = cfg.xdg.cache }
  for k, v in pairs(env) do
    vim.env[k] = v
  end
  vim.lsp.set_log_level("debug")
  report.lsp_log = vim.lsp.get_log_path()

  vim.cmd("filetype on")
  vim.cmd.edit(vim.fn.fnameescape(cfg.file))
  local bufnr = vim.api.nvim_get_current_buf()
  report.filetype = vim.bo[bufnr].filetype
  check(report.filetype == "python", "filetype detection gave " .. vim.inspect(report.filetype))

  local client_id = vim.lsp.start({
    name = "jaxlsp",
    -- As editors/nvim/README.md says to: isolated (-I), started outside the workspace.
    cmd = { cfg.python, "-I", "-m", "jaxlsp", "serve" },
    cmd_cwd = cfg.xdg.cache,
    cmd_env = env,
    root_dir = cfg.root,
    init_options = { jaxlsp = { trusted = true, liveShapes = false } }, -- explicit traces only
    handlers = {
      -- Trust comes from initializationOptions: a prompt is a failure, recorded, never answered.
      ["window/showMessageRequest"] = function(_, params)
        table.insert(report.prompts, params.message)
        return vim.NIL
      end,
      ["window/showMessage"] = function(_, params)
        table.insert(report.messages, params.message)
      end,
    },
  }, { bufnr = bufnr })
  check(client_id, "vim.lsp.start returned no client")
  client = assert(vim.lsp.get_client_by_id(client_id))
  wait_for("initialize", 15000, function()
    return client.initialized and vim.lsp.buf_is_attached(bufnr, client_id)
  end)
  step("initialized")
  report.offset_encoding = client.offset_encoding
  local caps = client.server_capabilities or {}
  report.code_lens_provider = caps.codeLensProvider ~= nil
  report.experimental = caps.experimental and caps.experimental.jaxlsp or nil

  -- Lenses: 0.11 first shows "Unresolved lens ...", then resolves each one. Neovim advertises no
  -- codeLens refresh support, so ask again until the resolved lens is there.
  local function predict_lens()
    for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
      if lens.range.start.line == cfg.predict_def_line and lens.command then
        return lens
      end
    end
  end
  local last_refresh = 0
  local function all_resolved()
    for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
      if not lens.command then
        return false
      end
    end
    return true
  end
  local function snapshot_lenses()
    report.lenses = {}
    for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
      table.insert(report.lenses, {
        line = lens.range.start.line,
        title = lens.command and lens.command.title or vim.NIL,
        command = lens.command and lens.command.command or vim.NIL,
        arguments = lens.command and lens.command.arguments or vim.NIL,
      })
    end
  end
  local waited, why = pcall(wait_for, "resolved code lenses, one on the predict def line", 20000, function()
    if predict_lens() and all_resolved() then
      return true
    end
    if uv.hrtime() - last_refresh > 300e6 then
      last_refresh = uv.hrtime()
      vim.lsp.codelens.refresh({ bufnr = bufnr })
    end
    return false
  end)
  snapshot_lenses() -- what the editor holds, reported on a timeout too
  if not waited then
    error(why, 0)
  end
  step("lenses")
  local lens = assert(predict_lens())
  check(
    lens.command.title:sub(1, #"Trace graph") == "Trace graph",
    "lens title on the predict line: " .. lens.command.title
  )

  -- Run the lens's command through the client: workspace/executeCommand.
  local done, trace_err, trace = false, nil, nil
  client:exec_cmd(lens.command, { bufnr = bufnr }, function(e, r)
    done, trace_err, trace = true, e, r
  end)
  wait_for("the trace command", 90000, function()
    return done
  end)
  if trace_err then
    error("jaxlsp.traceGraph failed: " .. vim.inspect(trace_err), 0)
  end
  report.trace = trace
  step("traced")
  check(type(trace) == "table" and type(trace.traceId) == "string", "no traceId in " .. vim.inspect(trace))

  local page = request("jaxlsp/graph", { traceId = trace.traceId }, 10000, bufnr)
  report.graph = { count = #(page.items or {}), items = {} }
  for _, item in ipairs(page.items or {}) do
    table.insert(report.graph.items, {
      kind = item.kind,
      primitive = item.primitive,
      groupKind = item.groupKind,
      nodes = item.counts and item.counts.nodes or nil,
    })
  end
  step("graph")

  local hover = request("textDocument/hover", {
    textDocument = vim.lsp.util.make_text_document_params(bufnr),
    position = { line = 11, character = 8 },
  }, 10000, bufnr)
  check(hover ~= nil and hover ~= vim.NIL, "no hover at 12:9")
  local contents = hover.contents
  if type(contents) == "table" and contents.value then
    report.hover = contents.value
  elseif type(contents) == "table" then
    local parts = {}
    for _, c in ipairs(contents) do
      table.insert(parts, type(c) == "table" and c.value or c)
    end
    report.hover = table.concat(parts, "\n")
  else
    report.hover = tostring(contents)
  end
  step("hover")

  check(#report.prompts == 0, "the server prompted for trust: " .. vim.inspect(report.prompts))
  check(report.graph.count > 0, "jaxlsp/graph returned no items")
  check(report.hover:find("dot_general", 1, true), "hover lacks dot_general: " .. report.hover)
  check(report.hover:find("f32[2,4]", 1, true), "hover lacks f32[2,4]: " .. report.hover)
end

H.finish(main)
