-- Headless run of engram.nvim's note commands against the real `engram lsp`:
-- :EngramRemember (kind and text from vim.ui.select / vim.ui.input), the code action's client
-- command engram.rememberSelection, :EngramRecall (quickfix list), :EngramForget.
--
--   ENGRAM_FILE=<file in a repository with a store> ENGRAM_OUT=<result.json>
--   nvim --headless --clean --cmd 'set rtp^=editors/neovim' -c 'luafile tests/editors/nvim_notes.lua'
local engram = require('engram')
local out = {}
local function wait(pred)
  return vim.wait(30000, pred, 50)
end
local ok, err = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.ENGRAM_FILE))
  out.attached = wait(function()
    return engram.last.attached ~= nil
  end)
  vim.ui.select = function(items, _, cb)
    out.kinds = items
    cb('decision')
  end
  vim.ui.input = function(_, cb)
    cb('Perimeters are never negative: checked by the caller')
  end
  vim.cmd('5,6EngramRemember')
  out.remembered = wait(function()
    return engram.last.remember ~= nil
  end) and engram.last.remember
  -- The code action "Remember a note for the selection…" runs the client command.
  local actions = vim.lsp.buf_request_sync(0, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(0) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = 2, character = 0 } },
    context = { diagnostics = {} },
  }, 10000)
  local client = engram.client(0)
  local action = actions and actions[client.id] and actions[client.id].result and actions[client.id].result[1]
  out.action = action and action.title
  engram.last.remember = nil
  vim.ui.input = function(_, cb)
    cb('Area is width times height, no units')
  end
  local cmd = action.command
  client.commands = client.commands or {}
  local handler = (client.config.commands or {})[cmd.command] or client.commands[cmd.command]
  handler(cmd, { bufnr = vim.api.nvim_get_current_buf(), client_id = client.id })
  out.second = wait(function()
    return engram.last.remember ~= nil
  end) and engram.last.remember
  vim.cmd('EngramRecall perimeters negative')
  out.recalled = wait(function()
    return engram.last.recall ~= nil
  end) and engram.last.recall
  out.qf = vim.tbl_map(function(i)
    return { lnum = i.lnum, text = i.text, file = vim.api.nvim_buf_get_name(i.bufnr) }
  end, vim.fn.getqflist())
  for _, made in ipairs({ out.remembered, out.second }) do
    engram.last.forget = nil
    vim.cmd('EngramForget ' .. made.id)
    wait(function()
      return engram.last.forget ~= nil
    end)
  end
  out.forgot = engram.last.forget
end)
out.error = not ok and tostring(err) or nil
local f = assert(io.open(vim.env.ENGRAM_OUT, 'w'))
f:write(vim.fn.json_encode(out))
f:close()
vim.cmd(ok and 'qall!' or 'cquit 1')
