--- What every part of the plugin shares: requests to the server across Neovim 0.10 and 0.11
--- (`client.request` became `client:request`), messages to the user, the jaxlsp client of a
--- buffer, and what the plugin remembers between calls.
local M = {}

M.name = "jaxlsp"
M.has_011 = vim.fn.has("nvim-0.11") == 1

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

function M.request(client, method, params, handler, bufnr)
  if M.has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.request_sync(client, method, params, ms, bufnr)
  if M.has_011 then
    return client:request_sync(method, params, ms, bufnr)
  end
  return client.request_sync(method, params, ms, bufnr)
end

function M.notify(client, method, params)
  if M.has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.say(msg, level)
  vim.notify("jaxlsp: " .. msg, level or vim.log.levels.INFO)
end

function M.warn(msg)
  M.say(msg, vim.log.levels.WARN)
end

function M.err_text(err)
  if type(err) == "table" then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
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

function M.client_or_warn(bufnr)
  local client = M.client(bufnr)
  if not client then
    local cmd = require("jaxlsp.config").current.cmd
    M.warn("no jaxlsp client: open a Python file (is `" .. cmd[1] .. "` on PATH? :checkhealth jaxlsp)")
  end
  return client
end

return M
