--- Tracing: `jaxlsp/trace` for the entrypoint at the cursor (or a named one), with the questions a
--- trace may need: what the profile lacks, typed with vim.ui.input and sent as typed (the server
--- parses it, and asks again with its message when it does not parse), and whether to save it.
local M = {}

local rpc = require("jaxlsp.rpc")

--- :JaxTrace completion: the entrypoints of the current buffer (`jaxlsp/discover`, 1 s at most).
function M.complete_entrypoints(lead)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = rpc.client(bufnr)
  if not client then
    return {}
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }
  local answer = rpc.request_sync(client, "jaxlsp/discover", params, 1000, bufnr)
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
  rpc.request(client, "jaxlsp/discover", { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, function(err, result)
    if err then
      return on_done(nil, rpc.err_text(err))
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

--- Ask, with vim.ui.input, for the needs-input items of `result` that still need an answer: those
--- not answered yet (`typed` holds what was typed, by path) and those the server refused
--- (`result.errors`: asked again from the text typed before, its message in the prompt).
--- `on_done(typed)` with the answers added, or `on_done(nil)` when the user cancels one.
function M.ask_inputs(result, typed, on_done)
  local errors = type(result.errors) == "table" and result.errors or {}
  local items = {}
  for _, item in ipairs(result.needsInput or {}) do
    if errors[item.path] ~= nil or typed[item.path] == nil then
      table.insert(items, item)
    end
  end
  local function ask(i)
    if i > #items then
      return on_done(typed)
    end
    local item = items[i]
    local problem = errors[item.path]
    if problem then
      rpc.warn(("%s: %s"):format(item.path, problem))
    end
    local prompt = ("jaxlsp: %s%s: "):format(item.message or item.path, problem and (" [" .. problem .. "]") or "")
    vim.ui.input({ prompt = prompt, default = typed[item.path] }, function(text)
      if text == nil then
        return on_done(nil)
      end
      typed[item.path] = text
      ask(i + 1)
    end)
  end
  ask(1)
end

local function ask_save(name, on_done)
  local choices = { "Trace only", "Trace and save to jaxlsp.toml" }
  vim.ui.select(choices, { prompt = ("jaxlsp: save the profile for %s?"):format(name) }, function(c)
    on_done(c ~= nil, c == choices[2])
  end)
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
  rpc.state.last = entry
  rpc.state.by_uri[uri] = entry
  rpc.state.traced = rpc.state.traced + 1
  vim.api.nvim_exec_autocmds("User", { pattern = "JaxlspTraced", data = vim.deepcopy(entry), modeline = false })
end

--- Trace an entrypoint through `jaxlsp/trace`: `opts = {name?, uri?, profile?, bufnr?}`; without
--- `name`, the entrypoint at the cursor. Missing inputs are asked with vim.ui.input.
--- `on_done(err, result)` gets the trace result or an error message.
function M.trace(opts, on_done)
  opts = opts or {}
  on_done = on_done or function() end
  local bufnr = (opts.bufnr == nil or opts.bufnr == 0) and vim.api.nvim_get_current_buf() or opts.bufnr
  local client = rpc.client_or_warn(bufnr)
  if not client then
    return on_done("no jaxlsp client")
  end
  local uri = opts.uri or vim.uri_from_bufnr(bufnr)
  local typed, save = nil, nil

  local function send(name)
    local params = { textDocument = { uri = uri }, name = name, profile = opts.profile }
    if typed then
      params.answers = typed
      params.save = save
    end
    rpc.say("tracing " .. name .. "…")
    rpc.request(client, "jaxlsp/trace", params, function(err, result)
      if err then
        rpc.warn(("tracing %s: %s"):format(name, rpc.err_text(err)))
        return on_done(rpc.err_text(err))
      end
      if result and result.needsInput then
        local first = typed == nil
        return M.ask_inputs(result, typed or {}, function(answers)
          if answers == nil then
            rpc.say("trace cancelled")
            return on_done("cancelled")
          end
          typed = answers
          if not first then
            return send(name)
          end
          -- Whether to save is asked once, with the first answers.
          ask_save(name, function(chosen, keep)
            if not chosen then
              rpc.say("trace cancelled")
              return on_done("cancelled")
            end
            save = keep
            send(name)
          end)
        end)
      end
      remember(client, uri, name, result)
      require("jaxlsp.client").refresh_lenses(client)
      rpc.say(("traced %s: %s"):format(name, describe(result)))
      if type(result.saved) == "string" then
        rpc.say("saved the profile to " .. vim.uri_to_fname(result.saved))
      end
      on_done(nil, result)
    end, bufnr)
  end

  if opts.name then
    return send(opts.name)
  end
  M.entry_at_cursor(client, bufnr, function(name, why)
    if not name then
      rpc.warn(why)
      return on_done(why)
    end
    send(name)
  end)
end

--- The trace to show for `bufnr`: its own last trace, else the last one anywhere.
function M.current_trace(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local name = vim.api.nvim_buf_get_name(bufnr)
  return (name ~= "" and rpc.state.by_uri[vim.uri_from_fname(name)]) or rpc.state.last
end

return M
