--- The first-run check (issue 48): when the server cannot start, or the folder's capture
--- interpreter cannot trace (no JAX in its `.venv`), the user sees one message that names what is
--- missing and the command that fixes it, instead of Neovim's spawn error or a refusal at the first
--- trace. Each command and each interpreter is reported once per session; `:checkhealth jaxlsp`
--- says the same at any time.
local M = {}

local rpc = require("jaxlsp.rpc")

--- How to get the server: it lives in its own environment, never in the project's.
M.INSTALL = "pipx install jaxlsp (or: uv tool install jaxlsp)"

local said = {} ---@type table<string, boolean>

local function once(key, msg, level)
  if said[key] then
    return
  end
  said[key] = true
  vim.notify(msg, level)
end

--- The server command's program is not executable: one message (per program), and true so that
--- no client is started (Neovim would report a spawn failure for every buffer).
function M.server_missing(cmd)
  local exe = type(cmd) == "table" and cmd[1] or nil
  if type(exe) ~= "string" or vim.fn.executable(exe) == 1 then
    return false
  end
  once(
    "cmd:" .. exe,
    ("jaxlsp: the server `%s` is not on PATH, so jaxlsp does not start. Install it: %s; it needs Python "
      .. ">= 3.11, and your project's environment needs only JAX. Then :LspStart or restart Neovim "
      .. "(:checkhealth jaxlsp says more)."):format(exe, M.INSTALL),
    vim.log.levels.ERROR
  )
  return true
end

--- Whether `root` is trusted for running its code: the plugin's setting or "Always" in the
--- server's per-user store. Only then is the capture interpreter run for the check.
function M.trusted(client)
  local opts = (client.config.init_options or {}).jaxlsp or {}
  local root = client.root_dir
  return opts.trusted == true or (root ~= nil and require("jaxlsp.launch").stored_trust(root))
end

--- The message for an environment report that cannot trace.
function M.message(result)
  local text = tostring(result.message)
  if type(result.install) == "string" and result.install ~= "" then
    text = text .. (text:match("[.!]$") and " " or ". ") .. "To install it, run: " .. result.install
  end
  return "jaxlsp: " .. text
end

--- After attach in a trusted folder: ask the server once whether the capture interpreter it
--- picked can trace; one warning when it cannot.
function M.check_capture(client, bufnr)
  if not M.trusted(client) then
    return
  end
  local key = "root:" .. tostring(client.root_dir)
  if said[key] then
    return
  end
  said[key] = true
  rpc.request(client, "jaxlsp/environment", { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, function(err, result)
    if err or type(result) ~= "table" or result.ok then
      return
    end
    once("python:" .. tostring(result.python), M.message(result), vim.log.levels.WARN)
  end, bufnr)
end

return M
