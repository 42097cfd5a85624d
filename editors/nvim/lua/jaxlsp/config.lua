--- The plugin's settings (`setup(opts)` over the defaults) and what follows from them: whether a
--- folder is trusted, and the server's `initializationOptions`.
local M = {}

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
  --- Live shapes: re-trace what a file touches on open and save (trusted workspaces only).
  live_shapes = true,
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
M.current = vim.deepcopy(M.defaults)

--- The settings `opts` over the defaults, now current.
function M.set(opts)
  M.current = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  return M.current
end

local function normalize(path)
  return (vim.fs.normalize(vim.fn.fnamemodify(path, ":p")):gsub("/$", ""))
end

--- Whether the user trusts `root` to run its code (setup's `trusted`). Never true by default.
function M.is_trusted(root)
  local trusted = M.current.trusted
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
  if M.current.python then
    opts.python = M.current.python
  end
  if M.current.timeout then
    opts.timeout = M.current.timeout
  end
  if M.current.inlay_hints then
    opts.inlayHints = true
  end
  if M.current.live_shapes == false then
    opts.liveShapes = false -- sent only when off: the server's default is on
  end
  return { jaxlsp = opts }
end

return M
