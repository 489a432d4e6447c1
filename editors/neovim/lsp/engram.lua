-- The `engram` server for Neovim 0.11+ `vim.lsp.enable('engram')` (the plugin enables it itself).
-- Attaches to file buffers inside a repository with an .engram/ directory, whatever the filetype.
return require('engram').lsp_config()
