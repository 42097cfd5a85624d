--- The user commands: :JaxTrace, :JaxGraph, :JaxOutline, :JaxNodeAt, :JaxLearn (once, whoever asks first:
--- setup(), or the first attach of a client started by `vim.lsp.enable("jaxlsp")` alone).
local M = {}

local created = false

function M.create()
  if created then
    return
  end
  created = true
  local cmd = vim.api.nvim_create_user_command
  cmd("JaxTrace", function(a)
    require("jaxlsp.trace").trace({ name = a.args ~= "" and a.args or nil })
  end, {
    nargs = "?",
    complete = function(lead)
      return require("jaxlsp.trace").complete_entrypoints(lead)
    end,
    desc = "jaxlsp: trace the entrypoint at the cursor (or the named one)",
  })
  cmd("JaxGraph", function()
    require("jaxlsp.views").open_graph()
  end, { desc = "jaxlsp: open the last trace's graph in the browser" })
  cmd("JaxOutline", function()
    require("jaxlsp.outline").open()
  end, { desc = "jaxlsp: groups and nodes of the last trace, <CR> jumps to source" })
  cmd("JaxNodeAt", function()
    require("jaxlsp.views").node_at()
  end, { desc = "jaxlsp: the traced operations on the cursor line, with shapes" })
  cmd("JaxLearn", function()
    require("jaxlsp.learn").learn()
  end, { desc = "jaxlsp: run the workspace's tests once to learn the inputs of what they call (live shapes)" })
end

return M
