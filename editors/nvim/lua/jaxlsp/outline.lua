--- :JaxOutline: a scratch buffer listing one trace's groups and nodes with their shapes, paged
--- through `jaxlsp/graph` one level at a time. <CR> on a group expands or collapses it, on a node
--- reveals its source (`jaxlsp/revealSource`), on "… more" loads the next page; q closes.
local M = {}

local PAGE = 200

--- Per outline buffer: {client, traceId, name, origin (window), roots (entries), lines (entry per line)}.
M.views = {}

local function jaxlsp()
  return require("jaxlsp")
end

local function request(client, method, params, handler)
  return jaxlsp().request(client, method, params, handler)
end

local function types_of(values)
  return jaxlsp().types_of(values)
end

--- The text of one entry (without indentation).
function M.entry_text(entry)
  if entry.more then
    return "… more (<CR> loads the next page)"
  end
  local item = entry.item
  if item.kind == "group" then
    local counts = item.counts or {}
    local label = (item.label and item.label ~= item.groupKind) and (" " .. item.label) or ""
    return ("%s %s%s  (%d nodes)"):format(entry.expanded and "▾" or "▸", item.groupKind, label, counts.nodes or 0)
  end
  local line = ("  %s %s → %s"):format(item.id, item.primitive, types_of(item.outputs))
  if type(item.source) == "table" and item.source.path then
    line = line .. ("  %s:%d"):format(vim.fs.basename(item.source.path), item.source.line)
  end
  return line
end

local function render(buf)
  local view = M.views[buf]
  if not view or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local lines = {
    ("jaxlsp · %s · trace %s"):format(view.name or "?", view.traceId),
    "<CR> expand / reveal source · q close",
  }
  view.lines = {}
  local function walk(entries, depth)
    for _, entry in ipairs(entries) do
      table.insert(lines, ("  "):rep(depth) .. M.entry_text(entry))
      view.lines[#lines] = entry
      if entry.expanded and entry.children then
        walk(entry.children, depth + 1)
      end
    end
  end
  walk(view.roots, 0)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

--- Fetch one page of `group` (nil: top level) into `list`, replacing a trailing "more" entry.
local function load(buf, list, group, cursor, on_done)
  local view = M.views[buf]
  local params = { traceId = view.traceId, group = group, cursor = cursor, limit = PAGE }
  request(view.client, "jaxlsp/graph", params, function(err, page)
    if err then
      vim.notify("jaxlsp: graph: " .. (err.message or vim.inspect(err)), vim.log.levels.WARN)
      return on_done(err)
    end
    if list[#list] and list[#list].more then
      table.remove(list)
    end
    for _, item in ipairs(page.items or {}) do
      table.insert(list, { item = item })
    end
    if page.nextCursor and page.nextCursor ~= vim.NIL then
      table.insert(list, { more = true, group = group, cursor = page.nextCursor })
    end
    render(buf)
    on_done(nil)
  end)
end

--- What <CR> does on line `lnum` (1-based) of outline `buf`; `on_done(err)` when it is done.
function M.activate(buf, lnum, on_done)
  on_done = on_done or function() end
  local view = M.views[buf]
  local entry = view and view.lines[lnum]
  if not entry then
    return on_done("nothing on this line")
  end
  if entry.more then
    local list = view.roots
    if entry.group then
      list = M.find_children(view.roots, entry.group) or view.roots
    end
    return load(buf, list, entry.group, entry.cursor, on_done)
  end
  local item = entry.item
  if item.kind == "group" then
    entry.expanded = not entry.expanded
    if entry.expanded and not entry.children then
      entry.children = {}
      return load(buf, entry.children, item.id, nil, on_done)
    end
    render(buf)
    return on_done(nil)
  end
  -- A node: jump in the window the outline was opened from, keeping the outline open.
  if view.origin and vim.api.nvim_win_is_valid(view.origin) then
    vim.api.nvim_set_current_win(view.origin)
  else
    vim.cmd("wincmd p")
  end
  jaxlsp().reveal(view.client, view.traceId, item.id, on_done)
end

function M.find_children(entries, group_id)
  for _, entry in ipairs(entries) do
    if entry.item and entry.item.id == group_id then
      return entry.children
    end
    if entry.children then
      local found = M.find_children(entry.children, group_id)
      if found then
        return found
      end
    end
  end
end

--- Open the outline of `opts.traceId` (default: the current buffer's last trace) in a split.
--- `on_ready(err, buf)` once the top level is listed.
function M.open(opts, on_ready)
  opts = opts or {}
  on_ready = on_ready or function() end
  local trace = opts.traceId and { traceId = opts.traceId, name = opts.name } or jaxlsp().current_trace(0)
  if not trace then
    vim.notify("jaxlsp: nothing traced yet: :JaxTrace first", vim.log.levels.WARN)
    return on_ready("nothing traced")
  end
  local client = opts.client
    or (trace.client_id and vim.lsp.get_client_by_id(trace.client_id))
    or jaxlsp().client(0)
  if not client then
    vim.notify("jaxlsp: no jaxlsp client", vim.log.levels.WARN)
    return on_ready("no jaxlsp client")
  end
  local origin = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "jaxlsp-outline"
  pcall(vim.api.nvim_buf_set_name, buf, "jaxlsp://outline/" .. trace.traceId)
  vim.cmd("botright vsplit")
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = false
  vim.wo.number = false
  M.views[buf] = {
    client = client,
    traceId = trace.traceId,
    name = trace.name,
    origin = origin,
    roots = {},
    lines = {},
  }
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    callback = function()
      M.views[buf] = nil
    end,
  })
  local function map(lhs, fn, desc)
    vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map("<CR>", function()
    M.activate(buf, vim.api.nvim_win_get_cursor(0)[1])
  end, "jaxlsp: expand group / reveal node source")
  map("q", "<cmd>close<cr>", "jaxlsp: close the outline")
  render(buf)
  load(buf, M.views[buf].roots, nil, nil, function(err)
    on_ready(err, buf)
  end)
  return buf
end

return M
