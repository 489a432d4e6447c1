-- engram.nvim: the Neovim client of `engram lsp` (why does this code exist?).
--
-- Works on Neovim 0.7.2 (vim.lsp.start_client + buf_attach_client), 0.8–0.10 (vim.lsp.start) and
-- 0.11+ (vim.lsp.config + vim.lsp.enable). Attaches to every file buffer inside a repository that
-- has an `.engram/` directory, whatever its filetype. `setup()` is optional.
local render = require('engram.render')

local M = {}

local defaults = {
  -- The server command (a list). nil: `{python, '-m', 'engram_server.entry', 'lsp'}` when `python`
  -- is set, else `engram lsp` from PATH.
  cmd = nil,
  python = nil,
  -- Start the server for buffers inside repositories with an .engram/ directory.
  autostart = true,
  -- Refresh code lenses on BufEnter, InsertLeave, BufWritePost and when the index changes.
  codelens = true,
  -- Map K to hover in attached buffers on Neovim < 0.10 (0.10+ maps it by default), unless K is
  -- already mapped for the buffer.
  keymaps = true,
  -- The hover window (options of vim.lsp.util.open_floating_preview): Engram's hovers are long.
  -- false leaves hover windows as Neovim makes them.
  hover = { border = 'rounded', max_width = 100, max_height = 30 },
  -- Where :EngramExplain and :EngramView open their scratch buffer: 'vsplit', 'split', 'tab', 'current'.
  open = 'vsplit',
  -- Sent to the server as initializationOptions and answered on workspace/configuration ("engram").
  settings = {
    lenses = true,
    hover = true,
    editorTape = true,
    window = { before = 3, after = 3 },
    minConfidence = 0.5,
    mcp = { enabled = true },
  },
}

M.config = vim.deepcopy(defaults)
M.NAME = 'engram'
M.INDEX_CHANGED = 'engram/indexChanged'

local initialized = false
local warned_missing = false
local clients_by_root = {} -- 0.7: root → client id
local progress_tokens = {} -- client id → token of the running cancellable progress
M.last = {} -- what the last commands did (for tests and :checkhealth)

local function has(v)
  return vim.fn.has('nvim-' .. v) == 1
end

local function notify(msg, level)
  vim.notify('engram: ' .. msg, level or vim.log.levels.INFO)
end

-- ------------------------------------------------------------------ version shims

local function all_clients()
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ name = M.NAME })
  end
  local out = {}
  for _, c in pairs(vim.lsp.get_active_clients()) do
    if c.name == M.NAME then
      out[#out + 1] = c
    end
  end
  return out
end

--- The engram client attached to a buffer (0 = current).
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  for _, c in ipairs(all_clients()) do
    if vim.lsp.buf_is_attached(bufnr, c.id) then
      return c
    end
  end
  return nil
end

local function request(client, method, params, handler, bufnr)
  if has('0.11') then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_notify(client, method, params)
  if has('0.11') then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function refresh_lenses(bufnr)
  if not M.config.codelens or not vim.api.nvim_buf_is_loaded(bufnr) then
    return
  end
  if has('0.10') then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  else
    vim.api.nvim_buf_call(bufnr, function()
      vim.lsp.codelens.refresh()
    end)
  end
end

-- ------------------------------------------------------------------ server and root

--- The repository root above a buffer's file: the nearest directory holding `.engram/`.
function M.root_of(bufnr)
  if vim.bo[bufnr].buftype ~= '' then
    return nil
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or name:match('^%a[%w+.-]*://') then
    return nil
  end
  local dir = vim.fn.fnamemodify(name, ':p:h')
  while dir and dir ~= '' do
    if vim.fn.isdirectory(dir .. '/.engram') == 1 then
      return dir
    end
    local parent = vim.fn.fnamemodify(dir, ':h')
    if parent == dir then
      break
    end
    dir = parent
  end
  return nil
end

--- The server command: config.cmd → config.python → `engram` on PATH; nil when none.
function M.server_cmd()
  local c = M.config
  if type(c.cmd) == 'table' and #c.cmd > 0 then
    return vim.deepcopy(c.cmd)
  elseif type(c.cmd) == 'string' and c.cmd ~= '' then
    return { c.cmd, 'lsp' }
  end
  if type(c.python) == 'string' and c.python ~= '' then
    return { c.python, '-m', 'engram_server.entry', 'lsp' }
  end
  if vim.fn.executable('engram') == 1 then
    return { vim.fn.exepath('engram'), 'lsp' }
  end
  return nil
end

M.MISSING = 'the `engram` executable was not found on PATH. Install Engram into a Python environment '
  .. '(`pip install engram`, or `pip install .` in an Engram checkout) and put its bin/ on PATH, or call '
  .. "require('engram').setup({ cmd = { '/path/to/engram', 'lsp' } }) or setup({ python = '/path/to/python' }). "
  .. 'See :help engram-server and :checkhealth engram.'

local function warn_missing()
  if not warned_missing then
    warned_missing = true
    notify(M.MISSING, vim.log.levels.ERROR)
  end
end

-- ------------------------------------------------------------------ handlers

local function on_index_changed(_, params, ctx)
  M.last.index_changed = params or {}
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and client and vim.lsp.buf_is_attached(buf, client.id) then
      refresh_lenses(buf)
    end
  end
end

local function progress_text(value)
  local parts = { value.title or M.last.progress_title or 'Engram' }
  if value.message then
    parts[#parts + 1] = value.message
  end
  if value.percentage then
    parts[#parts + 1] = ('(%d%%)'):format(value.percentage)
  end
  return table.concat(parts, ' ')
end

local function on_progress(err, result, ctx, config)
  local value = result and result.value
  if type(value) == 'table' and value.kind then
    if value.kind == 'begin' then
      M.last.progress_title = value.title
      if value.cancellable then
        progress_tokens[ctx.client_id] = result.token
      end
    end
    local text = progress_text(value)
    M.last.progress = M.last.progress or {}
    table.insert(M.last.progress, text)
    if value.kind == 'end' then
      progress_tokens[ctx.client_id] = nil
    end
    vim.api.nvim_echo({ { text, 'Comment' } }, false, {})
  end
  local default = vim.lsp.handlers['$/progress']
  if default then
    return default(err, result, ctx, config)
  end
end

-- The lens command: the server's `engram.explain`, shown in a scratch buffer instead of discarded.
local function lens_explain(command, ctx)
  local args = command.arguments or {}
  M.explain_range(ctx.bufnr, args[1], args[2], args[3])
end

-- The "Remember a note for the selection…" code action: ask kind and text, then remember.
local function remember_selection(command, ctx)
  local args = command.arguments or {}
  M.remember_range(ctx.bufnr, args[1], args[2])
end

local function lens_view(command, _)
  local a = command.arguments or {}
  M.view(a[1], a[2], a[3], a[4])
end

--- The attach API: 11 (vim.lsp.config + enable), 8 (vim.lsp.start) or 7 (start_client), by version;
--- `g:engram_api` ('config', 'start', 'start_client') forces an older one (for testing).
local function api_level()
  local forced = ({ config = 11, start = 8, start_client = 7 })[vim.g.engram_api or '']
  local native = has('0.11') and 11 or has('0.8') and 8 or 7
  return forced and math.min(forced, native) or native
end

--- Which Neovim LSP API the plugin attaches with.
function M.api()
  local level = api_level()
  if level >= 11 then
    return 'vim.lsp.config + vim.lsp.enable'
  elseif level >= 8 then
    return 'vim.lsp.start'
  end
  return 'vim.lsp.start_client + vim.lsp.buf_attach_client'
end

local function on_attach(client, bufnr)
  M.last.attached = { client_id = client.id, bufnr = bufnr }
  M.last.api = M.api()
  if M.config.codelens then
    local group = vim.api.nvim_create_augroup('engram_buf_' .. bufnr, { clear = true })
    vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'BufWritePost' }, {
      group = group,
      buffer = bufnr,
      callback = function()
        refresh_lenses(bufnr)
      end,
    })
    refresh_lenses(bufnr)
  end
  if M.config.keymaps then
    local existing = vim.api.nvim_buf_call(bufnr, function()
      return vim.fn.maparg('K', 'n', false, true)
    end)
    local mine = type(existing) ~= 'table' or existing.buffer ~= 1 or existing.desc == 'vim.lsp.buf.hover()'
    if mine and has('0.11') then
      -- 0.11's vim.lsp.buf.hover() takes the window options itself (handlers are not used).
      vim.keymap.set('n', 'K', function()
        vim.lsp.buf.hover(type(M.config.hover) == 'table' and vim.deepcopy(M.config.hover) or nil)
      end, { buffer = bufnr, desc = 'vim.lsp.buf.hover()' })
    elseif mine and not has('0.10') then
      vim.keymap.set('n', 'K', vim.lsp.buf.hover, { buffer = bufnr, desc = 'vim.lsp.buf.hover()' })
    end
  end
  if type(M.config.on_attach) == 'function' then
    M.config.on_attach(client, bufnr)
  end
end

--- The client configuration (for vim.lsp.start / start_client / vim.lsp.config).
function M.client_config(root)
  local settings = vim.deepcopy(M.config.settings)
  return {
    name = M.NAME,
    cmd = M.server_cmd(),
    root_dir = root,
    init_options = settings,
    settings = { engram = settings },
    handlers = {
      [M.INDEX_CHANGED] = on_index_changed,
      ['$/progress'] = on_progress,
      -- Before 0.11, K → vim.lsp.buf.hover() goes through this handler.
      ['textDocument/hover'] = (type(M.config.hover) == 'table' and not has('0.11'))
        and vim.lsp.with(vim.lsp.handlers.hover, vim.deepcopy(M.config.hover)) or nil,
    },
    commands = {
      ['engram.explain'] = lens_explain,
      ['engram.view'] = lens_view,
      ['engram.rememberSelection'] = remember_selection,
    },
    on_attach = on_attach,
  }
end

--- The vim.lsp.config('engram') table for Neovim 0.11+ (also returned by lsp/engram.lua).
function M.lsp_config()
  local cfg = M.client_config(nil)
  cfg.root_dir = function(bufnr, on_dir)
    local root = M.root_of(bufnr)
    if not root then
      return
    end
    if not M.server_cmd() then
      return warn_missing()
    end
    on_dir(root)
  end
  cfg.cmd = cfg.cmd or { 'engram', 'lsp' } -- never started without a command (see root_dir)
  return cfg
end

--- Attach the engram client to a buffer when it lies in a repository with a store.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not vim.api.nvim_buf_is_valid(bufnr) or M.client(bufnr) then
    return M.client(bufnr)
  end
  local root = M.root_of(bufnr)
  if not root then
    return nil
  end
  local cmd = M.server_cmd()
  if not cmd then
    warn_missing()
    return nil
  end
  local level = api_level()
  if level >= 8 then
    local config = level >= 11 and vim.tbl_extend('force', vim.lsp.config[M.NAME] or M.lsp_config(), { root_dir = root })
      or M.client_config(root)
    config.cmd = cmd
    local id = vim.lsp.start(config, { bufnr = bufnr })
    return id and vim.lsp.get_client_by_id(id)
  end
  -- 0.7: one client per root, attached to each buffer.
  local id = clients_by_root[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(M.client_config(root))
    clients_by_root[root] = id
  end
  if not id then
    return nil
  end
  vim.lsp.buf_attach_client(bufnr, id)
  return vim.lsp.get_client_by_id(id)
end

-- ------------------------------------------------------------------ scratch buffers

local function scratch(name, lines, targets)
  local buf = vim.fn.bufnr(name)
  if buf == -1 or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].engram_targets = nil
  M._targets = M._targets or {}
  M._targets[buf] = targets or {}
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 then
    vim.api.nvim_set_current_win(win)
  else
    local how = M.config.open
    if how == 'split' then
      vim.cmd('split')
    elseif how == 'tab' then
      vim.cmd('tabnew')
    elseif how ~= 'current' then
      vim.cmd('vsplit')
    end
    vim.api.nvim_win_set_buf(0, buf)
  end
  vim.wo.wrap = true
  vim.wo.linebreak = true
  vim.keymap.set('n', 'q', '<cmd>close<cr>', { buffer = buf, silent = true, desc = 'engram: close' })
  vim.keymap.set('n', '<CR>', function()
    local t = M._targets[buf] and M._targets[buf][vim.api.nvim_win_get_cursor(0)[1]]
    if t then
      M.view(t[1], t[2], 10, 10)
    end
  end, { buffer = buf, silent = true, desc = 'engram: open the transcript here' })
  return buf
end

local function exec(client, bufnr, command, arguments, on_result)
  request(client, 'workspace/executeCommand', { command = command, arguments = arguments }, function(err, result)
    if err then
      notify(command .. ' failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    on_result(result)
  end, bufnr)
end

local function any_client()
  return M.client(0) or all_clients()[1]
end

local function need_client(bufnr)
  local client = bufnr and M.client(bufnr) or any_client()
  if not client then
    if not M.server_cmd() then
      warn_missing()
    else
      notify('no Engram server for this buffer: open a file inside a repository with an .engram/ directory '
        .. '(run `engram init` there)', vim.log.levels.WARN)
    end
  end
  return client
end

local function lines_range(first, last)
  return { start = { line = first, character = 0 }, ['end'] = { line = last + 1, character = 0 } }
end

--- The evidence region (0-based lines) under `line`, from the server's lenses.
function M.region_at(bufnr, line)
  local client = M.client(bufnr)
  if not client then
    return nil
  end
  local resp = vim.lsp.buf_request_sync(bufnr, 'textDocument/codeLens',
    { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, 5000) or {}
  local r = resp[client.id]
  for _, lens in ipairs((r and r.result) or {}) do
    local d = lens.data
    if type(d) == 'table' and tonumber(d.start) and tonumber(d['end']) and d.start <= line and line <= d['end'] then
      return d.start, d['end']
    end
  end
  return nil
end

--- Explain a range given as an LSP range table (what a lens carries); opens the result.
function M.explain_range(bufnr, uri, range, options)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  uri = uri or vim.uri_from_bufnr(bufnr)
  local client = need_client(bufnr)
  if not client then
    return
  end
  local window = M.config.settings.window or {}
  options = vim.tbl_extend('force', { before = window.before or 3, after = window.after or 3 }, options or {})
  exec(client, bufnr, 'engram.explain', { uri, range, options }, function(res)
    M.last.explain = res
    local span = res.result.span
    local lines, targets
    if type(res.markdown) == 'string' then
      -- the server's rendering (the rules of its hover and `engram explain --pretty`)
      lines, targets = render.served(res)
    else
      lines, targets = render.explain(res, { before = options.before, after = options.after,
        language = render.language(span.file) })
    end
    local buf = scratch(('engram://why/%s:%d-%d'):format(span.file, span.start, span['end']), lines, targets)
    vim.keymap.set('n', '+', function()
      M.explain_range(bufnr, uri, range, { before = options.before * 2 + 3, after = options.after * 2 + 3 })
    end, { buffer = buf, silent = true, desc = 'engram: widen the transcript windows' })
    M.last.explain_buf = buf
  end)
end

--- :[range]EngramExplain — the range, else the evidence region under the cursor, else the cursor line.
function M.explain(first, last)
  local bufnr = vim.api.nvim_get_current_buf()
  if not first then
    local line = vim.api.nvim_win_get_cursor(0)[1] - 1
    local a, b = M.region_at(bufnr, line)
    first, last = a or line, b or line
  else
    first, last = first - 1, last - 1
  end
  M.explain_range(bufnr, nil, lines_range(first, last))
end

--- Open a transcript window: events `before`/`after` around `offset` of `tape`.
function M.view(tape, offset, before, after)
  local client = need_client(nil)
  if not client then
    return
  end
  offset, before, after = tonumber(offset) or 0, tonumber(before) or 10, tonumber(after) or 10
  exec(client, nil, 'engram.view', { tape, offset, before, after }, function(res)
    M.last.view = res
    local whole = after >= 100000
    local lines = render.view(res, { whole = whole })
    local targets = {}
    local buf = scratch(('engram://transcript/%s@%s'):format(res.session_id, whole and 'all' or res.at), lines, targets)
    local first = res.events[1] and res.events[1].offset or res.at
    local last = res.events[#res.events] and res.events[#res.events].offset or res.at
    vim.keymap.set('n', '[', function()
      M.view(res.tape, first, 20, 0)
    end, { buffer = buf, silent = true, desc = 'engram: earlier events' })
    vim.keymap.set('n', ']', function()
      M.view(res.tape, last, 0, 20)
    end, { buffer = buf, silent = true, desc = 'engram: later events' })
    M.last.view_buf = buf
  end)
end

--- :EngramView with no arguments: pick one of the touches of the code under the cursor.
function M.view_here()
  local bufnr = vim.api.nvim_get_current_buf()
  local t = M._targets and M._targets[bufnr] and M._targets[bufnr][vim.api.nvim_win_get_cursor(0)[1]]
  if t then
    return M.view(t[1], t[2], 10, 10)
  end
  local client = need_client(bufnr)
  if not client then
    return
  end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  local a, b = M.region_at(bufnr, line)
  exec(client, bufnr, 'engram.explain', { vim.uri_from_bufnr(bufnr), lines_range(a or line, b or line), { brief = true } },
    function(res)
      local items = {}
      for i, s in ipairs(res.result.sessions) do
        for _, f in ipairs(s.fragments or {}) do
          items[#items + 1] = { label = ('%d. %s · %s · #%d'):format(i, render.harness(s.harness), render.touch_label(f),
            f.offset), tape = f.tape, offset = f.offset }
        end
      end
      if #items == 0 then
        return notify('no recorded session touched this code')
      elseif #items == 1 then
        return M.view(items[1].tape, items[1].offset, 10, 10)
      end
      vim.ui.select(items, { prompt = 'Transcript at which touch?', format_item = function(it)
        return it.label
      end }, function(choice)
        if choice then
          M.view(choice.tape, choice.offset, 10, 10)
        end
      end)
    end)
end

function M.ingest()
  local client = need_client(nil)
  if not client then
    return
  end
  M.last.progress = {}
  exec(client, nil, 'engram.ingest', {}, function(res)
    M.last.ingest = res
    notify(res.cancelled and ('ingest cancelled. ' .. (res.summary or '')) or (res.summary or 'ingested'))
  end)
end

function M.cancel()
  for id, token in pairs(progress_tokens) do
    local client = vim.lsp.get_client_by_id(id)
    if client then
      client_notify(client, 'window/workDoneProgress/cancel', { token = token })
      notify('cancelling')
    end
  end
end

function M.reindex()
  local client = need_client(nil)
  if not client then
    return
  end
  notify('rebuilding the index…')
  exec(client, nil, 'engram.reindex', {}, function(res)
    M.last.reindex = res
    notify('index rebuilt')
  end)
end

function M.tapes()
  local client = need_client(nil)
  if not client then
    return
  end
  exec(client, nil, 'engram.tapes', {}, function(rows)
    local lines = { '# Engram tapes', '', '| tape | harness | session | model | started | events |', '|---|---|---|---|---|---|' }
    local targets = {}
    for _, t in ipairs(rows or {}) do
      lines[#lines + 1] = ('| `%s` | %s | `%s` | %s | %s | %s |'):format(t.id:sub(1, 12), render.harness(t.harness),
        t.session_id, tostring(t.model), render.when(t.started), tostring(t.events))
      targets[#lines] = { t.id, 0 }
    end
    M.last.tapes = rows
    scratch('engram://tapes', lines, targets)
  end)
end

function M.restart()
  for _, c in ipairs(all_clients()) do
    if has('0.11') then
      c:stop()
    else
      c.stop()
    end
  end
  clients_by_root = {}
  vim.defer_fn(function()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) then
        M.attach(buf)
      end
    end
  end, 500)
end

-- ------------------------------------------------------------------ notes (memories)

M.KINDS = { 'fact', 'decision', 'preference', 'pattern', 'debug', 'todo', 'negative' }

--- Remember a note for an LSP range of a buffer: the kind with vim.ui.select, the text with
--- vim.ui.input, anchored to the buffer's text as it is (saved or not).
function M.remember_range(bufnr, uri, range)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  uri = uri or vim.uri_from_bufnr(bufnr)
  local client = need_client(bufnr)
  if not client then
    return
  end
  vim.ui.select(M.KINDS, { prompt = 'Engram note kind' }, function(kind)
    if not kind then
      return
    end
    vim.ui.input({ prompt = 'Engram note: ' }, function(text)
      if not text or vim.trim(text) == '' then
        return
      end
      exec(client, bufnr, 'engram.remember', { uri, range, text, kind }, function(res)
        M.last.remember = res
        notify(res.merged_into and ('reinforced note ' .. res.merged_into) or ('remembered note ' .. res.id))
      end)
    end)
  end)
end

--- :[range]EngramRemember — a note for the selected lines (else the cursor line).
function M.remember(first, last)
  local bufnr = vim.api.nvim_get_current_buf()
  if not first then
    first = vim.api.nvim_win_get_cursor(0)[1]
    last = first
  end
  M.remember_range(bufnr, nil, lines_range(first - 1, last - 1))
end

--- :EngramForget ID — forget a note (its tombstone is written; `engram forget --purge` erases it).
function M.forget(id)
  local client = need_client(nil)
  if not client then
    return
  end
  exec(client, nil, 'engram.forget', { id }, function(res)
    M.last.forget = res
    notify('forgot note ' .. res.id)
  end)
end

--- :EngramRecall QUERY — the notes that answer it (those anchored near the cursor first), in the
--- quickfix list, each at its anchor.
function M.recall(query)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = need_client(bufnr)
  if not client then
    return
  end
  local uri = M.client(bufnr) and vim.uri_from_bufnr(bufnr) or vim.NIL
  exec(client, bufnr, 'engram.recall', { query, uri }, function(rows)
    M.last.recall = rows
    local items = {}
    for _, r in ipairs(rows or {}) do
      local text = ('[%s] %s'):format(r.kind, (vim.split(r.content, '\n')[1] or ''))
      if r.location ~= vim.NIL and r.location then
        items[#items + 1] = { filename = vim.uri_to_fname(r.location.uri), lnum = r.location.range.start.line + 1,
          text = text .. (r.state and r.state ~= 'intact' and (' (' .. r.state .. ')') or '') }
      else
        items[#items + 1] = { text = text .. ' (' .. r.id .. ', not anchored)' }
      end
    end
    vim.fn.setqflist({}, ' ', { title = 'Engram recall: ' .. query, items = items })
    if #items == 0 then
      notify('no note answers ' .. query)
    else
      vim.cmd('copen')
    end
  end)
end

-- ------------------------------------------------------------------ commands and autostart

local function define_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd('EngramExplain', function(o)
    if o.range > 0 then
      M.explain(o.line1, o.line2)
    else
      M.explain()
    end
  end, { range = true, desc = 'Explain the selected lines (or the region under the cursor)' })
  cmd('EngramView', function(o)
    if #o.fargs == 0 then
      M.view_here()
    else
      M.view(o.fargs[1], o.fargs[2], o.fargs[3], o.fargs[4])
    end
  end, { nargs = '*', desc = 'Transcript at a touch: [TAPE OFFSET [BEFORE AFTER]]' })
  cmd('EngramIngest', function()
    M.ingest()
  end, { desc = 'Capture new agent sessions and index them' })
  cmd('EngramCancel', function()
    M.cancel()
  end, { desc = 'Cancel a running ingest' })
  cmd('EngramReindex', function()
    M.reindex()
  end, { desc = 'Rebuild the index from the tapes' })
  cmd('EngramTapes', function()
    M.tapes()
  end, { desc = 'List the captured tapes' })
  cmd('EngramRemember', function(o)
    if o.range > 0 then
      M.remember(o.line1, o.line2)
    else
      M.remember()
    end
  end, { range = true, desc = 'Remember a note for the selected lines (asks kind and text)' })
  cmd('EngramForget', function(o)
    M.forget(o.args)
  end, { nargs = 1, desc = 'Forget a note: ID' })
  cmd('EngramRecall', function(o)
    M.recall(o.args)
  end, { nargs = '+', desc = 'Notes that answer QUERY, in the quickfix list' })
  cmd('EngramRestart', function()
    M.restart()
  end, { desc = 'Restart the Engram language server' })
end

local function attach_later(buf)
  vim.schedule(function()
    if vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_buf_is_loaded(buf) then
      M.attach(buf)
    end
  end)
end

function M._init()
  if initialized then
    return
  end
  initialized = true
  define_commands()
  if not M.config.autostart then
    return
  end
  local group = vim.api.nvim_create_augroup('engram', { clear = true })
  if api_level() >= 11 then
    vim.lsp.config(M.NAME, M.lsp_config())
    vim.lsp.enable(M.NAME)
  end
  -- Every file buffer, whatever its filetype (0.11's vim.lsp.enable only sees buffers with one).
  vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
    group = group,
    callback = function(args)
      attach_later(args.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_name(buf) ~= '' then
      attach_later(buf)
    end
  end
end

--- Optional: merge options (see :help engram-setup). Safe to call before or after the plugin loads.
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  warned_missing = false
  if initialized and api_level() >= 11 then
    vim.lsp.config(M.NAME, M.lsp_config())
  end
  for _, c in ipairs(all_clients()) do
    client_notify(c, 'workspace/didChangeConfiguration', { settings = { engram = M.config.settings } })
    c.config.settings = { engram = vim.deepcopy(M.config.settings) }
  end
  M._init()
end

return M
