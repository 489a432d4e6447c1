-- engram.nvim: why does this code exist? Loads the client of `engram lsp` (see :help engram).
if vim.g.loaded_engram then
  return
end
vim.g.loaded_engram = true
if vim.fn.has('nvim-0.7') == 0 then
  vim.api.nvim_echo({ { 'engram.nvim needs Neovim 0.7 or newer', 'WarningMsg' } }, true, {})
  return
end
require('engram')._init()
