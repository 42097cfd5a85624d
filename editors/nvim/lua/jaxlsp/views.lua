--- Views of a trace: the graph in the browser (`jaxlsp/openGraph`), a node's source
--- (`jaxlsp/revealSource`, without jumping twice when the server's showDocument already did) and
--- the traced operations on the cursor line (`jaxlsp/nodesAt`, `jaxlsp/node`).
local M = {}

local rpc = require("jaxlsp.rpc")

--- Open a URL in the browser (vim.ui.open, Neovim 0.10+). Returns ok, error.
function M.open_url(url)
  table.insert(rpc.state.opened, url)
  if not vim.ui.open then
    return false, "vim.ui.open needs Neovim 0.10"
  end
  local cmd, why = vim.ui.open(url)
  if not cmd then
    rpc.warn("could not open " .. url .. ": " .. tostring(why))
    return false, why
  end
  return true
end

--- `jaxlsp/openGraph` for the current trace, opened in the browser (once: the server may already
--- have asked with window/showDocument).
function M.open_graph(on_done)
  on_done = on_done or function() end
  local trace = require("jaxlsp.trace").current_trace(0)
  if not trace then
    rpc.warn("nothing traced yet: :JaxTrace first")
    return on_done("nothing traced")
  end
  local client = vim.lsp.get_client_by_id(trace.client_id) or rpc.client_or_warn(0)
  if not client then
    return on_done("no jaxlsp client")
  end
  local shown = rpc.state.shown
  rpc.request(client, "jaxlsp/openGraph", { traceId = trace.traceId }, function(err, result)
    if err then
      rpc.warn("open graph: " .. rpc.err_text(err))
      return on_done(rpc.err_text(err))
    end
    if rpc.state.shown == shown then
      M.open_url(result.url)
    end
    on_done(nil, result.url)
  end)
end

--- `jaxlsp/revealSource`, then jump to the location unless the server's showDocument already did.
function M.reveal(client, trace_id, node_id, on_done)
  on_done = on_done or function() end
  local shown = rpc.state.shown
  rpc.request(client, "jaxlsp/revealSource", { traceId = trace_id, nodeId = node_id }, function(err, result)
    if err then
      rpc.warn("reveal: " .. rpc.err_text(err))
      return on_done(rpc.err_text(err))
    end
    if rpc.state.shown == shown then
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
  local client = rpc.client_or_warn(bufnr)
  if not client then
    return on_done("no jaxlsp client")
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  rpc.request(client, "jaxlsp/nodesAt", params, function(err, found)
    if err then
      rpc.warn("nodes at cursor: " .. rpc.err_text(err))
      return on_done(rpc.err_text(err))
    end
    local ids = found and found.nodeIds or {}
    if found == nil or found.traceId == vim.NIL or found.traceId == nil or #ids == 0 then
      rpc.say("no traced operation on this line")
      return on_done(nil, {})
    end
    local shown = math.min(#ids, limit)
    local lines, pending = {}, shown
    for i = 1, shown do
      rpc.request(client, "jaxlsp/node", { traceId = found.traceId, nodeId = ids[i] }, function(e, node)
        lines[i] = e and (ids[i] .. ": " .. rpc.err_text(e)) or M.node_line(node)
        pending = pending - 1
        if pending == 0 then
          if #ids > shown then
            table.insert(lines, ("… %d more"):format(#ids - shown))
          end
          rpc.say(("trace %s, line %d:\n%s"):format(found.traceId, params.position.line + 1, table.concat(lines, "\n")))
          on_done(nil, lines)
        end
      end, bufnr)
    end
  end, bufnr)
end

return M
