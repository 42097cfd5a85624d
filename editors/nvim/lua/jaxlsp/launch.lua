--- How the server process starts, so that nothing of an untrusted workspace runs
--- (docs/security.md): from a folder outside the workspace, Python in isolated mode (`-I`, so the
--- current folder never comes first on `sys.path`), and never a program that lies inside an
--- untrusted workspace (its `.venv` is workspace code).
local M = {}

local function normalize(path)
  local full = vim.fn.fnamemodify(path, ":p")
  local real = vim.uv.fs_realpath(full) or full
  return (vim.fs.normalize(real):gsub("/$", ""))
end

--- Whether `path` is `root` or lies below it (both resolved through links).
function M.inside(path, root)
  if path == nil or root == nil then
    return false
  end
  local here, base = normalize(path), normalize(root)
  return here == base or here:sub(1, #base + 1) == base .. "/"
end

--- `cmd` with `-I` after the interpreter when it runs `-m jaxlsp` without it: started as a module,
--- Python would otherwise put the current folder first on `sys.path`.
function M.isolated(cmd)
  if type(cmd) ~= "table" then
    return cmd
  end
  for i = 2, #cmd - 1 do
    if cmd[i] == "-m" and cmd[i + 1] == "jaxlsp" then
      for j = 2, i - 1 do
        if cmd[j] == "-I" then
          return cmd
        end
      end
      local out = vim.deepcopy(cmd)
      table.insert(out, 2, "-I")
      return out
    end
  end
  return cmd
end

--- The server's working folder: Neovim's cache folder for jaxlsp, else the temporary folder, the
--- first that is outside `root` (created when missing).
function M.cwd(root)
  for _, dir in ipairs({ vim.fn.stdpath("cache") .. "/jaxlsp", vim.uv.os_tmpdir(), "/" }) do
    if dir and not M.inside(dir, root) then
      vim.fn.mkdir(dir, "p")
      return dir
    end
  end
  return "/"
end

--- The files a program amounts to: its path, the target of a link, and the interpreter on a
--- script's `#!` line.
local function program_files(exe)
  local files = { exe }
  local real = vim.uv.fs_realpath(exe)
  if real then
    table.insert(files, real)
  end
  local fd = io.open(exe, "rb")
  if fd then
    local first = fd:read(256) or ""
    fd:close()
    local interpreter = first:match("^#!%s*(/[^%s]+)")
    if interpreter then
      table.insert(files, interpreter)
    end
  end
  return files
end

--- The program `cmd[1]` lies inside `root` (itself, a link's target, or its `#!` interpreter).
--- Returns the offending path, or nil.
function M.program_inside(cmd, root)
  local exe = type(cmd) == "table" and cmd[1] or nil
  if exe == nil or root == nil then
    return nil
  end
  local found = vim.fn.exepath(exe)
  if found == "" then
    return nil
  end
  for _, file in ipairs(program_files(found)) do
    if M.inside(file, root) then
      return found
    end
  end
  return nil
end

--- Folders the user trusted "Always" through the server's prompt (its per-user store, outside
--- every workspace: `$XDG_CONFIG_HOME/jaxlsp/trusted.json`).
function M.stored_trust(root)
  local base = vim.env.XDG_CONFIG_HOME
  if base == nil or base == "" then
    base = vim.fn.expand("~/.config")
  end
  local fd = io.open(base .. "/jaxlsp/trusted.json", "r")
  if not fd then
    return false
  end
  local ok, data = pcall(vim.json.decode, fd:read("*a"))
  fd:close()
  if not ok or type(data) ~= "table" or type(data.folders) ~= "table" then
    return false
  end
  for _, folder in ipairs(data.folders) do
    if type(folder) == "string" and M.inside(root, folder) then
      return true
    end
  end
  return false
end

--- Roots no client started for, with the command that lies inside them (`:checkhealth jaxlsp`).
M.refused = {} ---@type table<string, string>

--- Whether a client may start for `root` with `cmd`; warns once per root when it may not.
--- `trusted(root)` is the plugin's own trust setting.
function M.may_start(cmd, root, trusted)
  local inside = M.program_inside(cmd, root)
  if inside == nil or trusted(root) or M.stored_trust(root) then
    return true
  end
  if not M.refused[root] then
    M.refused[root] = inside
    vim.notify(
      ("jaxlsp: not started for %s: the server command %s lies inside that folder, which is not trusted "
        .. "(its code would run before you decide). Install jaxlsp outside it, or trust the folder: "
        .. "setup({ trusted = { %q } })"):format(root, inside, root),
      vim.log.levels.WARN
    )
  end
  return false
end

return M
