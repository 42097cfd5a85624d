--- The jaxlsp client for `vim.lsp.enable("jaxlsp")` (Neovim 0.11) with no `setup()`: the
--- plugin's own client configuration with its defaults (the `jaxlsp` script from PATH, started
--- outside the workspace; trust asked by the server), its lens refresh, showDocument handling and
--- :Jax* commands (created on the first attach). `vim.lsp.config("jaxlsp", {...})` or
--- `require("jaxlsp").setup({...})` change it.
return require("jaxlsp.client").config()
