--- :JaxLearn: the server's `jaxlsp.learnShapes` (issue 46). It runs the tests and documented scripts
--- of the current buffer's workspace folder once, so that the modules and helpers they reach get
--- inputs and live shapes. The server reports `$/progress` (examples done, targets learned), which
--- Neovim's LSP progress shows (`vim.lsp.status()`, the LspProgress event); its summary comes as a
--- window/showMessage, and the answer's figures end here in one message.
local rpc = require("jaxlsp.rpc")

local M = {}

--- The workspace folder of `client` that holds `fname` (the innermost), else nil.
local function folder_of(client, fname)
  local best = nil
  for _, folder in ipairs(client.workspace_folders or {}) do
    local root = vim.uri_to_fname(folder.uri)
    local prefix = root:sub(-1) == "/" and root or root .. "/"
    if (fname == root or fname:sub(1, #prefix) == prefix) and (best == nil or #root > #best.root) then
      best = { root = root, uri = folder.uri }
    end
  end
  return best and best.uri or nil
end

--- Learn shapes for the workspace folder of `opts.bufnr` (default: current); `on_done(err, result)`.
function M.learn(opts, on_done)
  opts = opts or {}
  on_done = on_done or function() end
  local bufnr = (opts.bufnr == nil or opts.bufnr == 0) and vim.api.nvim_get_current_buf() or opts.bufnr
  local client = rpc.client_or_warn(bufnr)
  if not client then
    return on_done("no jaxlsp client")
  end
  local fname = vim.api.nvim_buf_get_name(bufnr)
  local folder = opts.uri or (fname ~= "" and folder_of(client, fname)) or nil
  local arguments = folder and { { uri = folder } } or {}
  rpc.say("learning shapes from the workspace's tests…")
  rpc.request(client, "workspace/executeCommand", { command = "jaxlsp.learnShapes", arguments = arguments }, function(err, result)
    if err then
      rpc.warn("learning shapes: " .. rpc.err_text(err))
      return on_done(rpc.err_text(err))
    end
    local failed = result and result.failures and #result.failures or 0
    rpc.say(
      ("learned the inputs of %d targets from %d examples in %.1f s%s"):format(
        result and result.learned or 0,
        result and result.examples and #result.examples or 0,
        result and result.seconds or 0,
        failed > 0 and ("; %d failed (first: %s)"):format(failed, result.failures[1]) or ""
      )
    )
    on_done(nil, result)
  end, bufnr)
end

return M
