-- :checkhealth engram
local M = {}

local h = vim.health or require('health')
local start = h.start or h.report_start
local ok = h.ok or h.report_ok
local warn = h.warn or h.report_warn
local error = h.error or h.report_error
local info = h.info or h.report_info

function M.check()
  local engram = require('engram')
  start('engram')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.7') == 1 then
    ok(('Neovim %s: attaches with %s'):format(version, engram.api()))
  else
    error(('Neovim %s is too old: engram.nvim needs 0.7 or newer'):format(version))
  end

  local cmd = engram.server_cmd()
  if not cmd then
    error(engram.MISSING)
  elseif vim.fn.executable(cmd[1]) == 1 then
    ok('server command: ' .. table.concat(cmd, ' '))
  else
    error(('server command %s is not executable: fix `cmd` or `python` in setup()'):format(cmd[1]))
  end

  -- :checkhealth opens its own buffer: look at the file buffer the user came from.
  local buf = vim.api.nvim_get_current_buf()
  local candidates = { buf, vim.fn.bufnr('#') }
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    candidates[#candidates + 1] = b
  end
  for _, b in ipairs(candidates) do
    if b > 0 and vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' and vim.api.nvim_buf_get_name(b) ~= '' then
      buf = b
      break
    end
  end
  local name = vim.api.nvim_buf_get_name(buf)
  local root = engram.root_of(buf)
  if name == '' or vim.bo[buf].buftype ~= '' then
    info('open a file of your repository to check its store and client')
  elseif root then
    ok('store: ' .. root .. '/.engram')
    local client = engram.client(buf)
    if client then
      ok(('client %d attached to this buffer (root %s)'):format(client.id, client.config.root_dir or '?'))
    else
      warn('no engram client attached to this buffer: see :LspLog, or run :EngramRestart')
    end
  else
    warn('no .engram/ above ' .. name .. ': run `engram init` and `engram ingest` in the repository')
  end
end

return M
