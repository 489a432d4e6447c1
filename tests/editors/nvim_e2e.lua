-- Headless end-to-end run of the engram.nvim plugin against the real `engram lsp` (Neovim 0.7 .. 0.11+).
--
--   ENGRAM_FILE=<agent-written file> ENGRAM_PLAIN=<file with no filetype> ENGRAM_OUT=<result.json>
--   [ENGRAM_SETUP=<json options for setup()>] [ENGRAM_SESSION=<expected session id>]
--   nvim --headless --clean --cmd 'set rtp^=editors/neovim' -c 'luafile tests/editors/nvim_e2e.lua'
--
-- Writes what it saw to ENGRAM_OUT and exits 0 when every check passed, 1 otherwise.
local env = vim.env
local results = { checks = {} }
local v = vim.version()
results.nvim = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
local t0 = vim.loop.hrtime()

local function ms()
  return math.floor((vim.loop.hrtime() - t0) / 1e6)
end

local function finish()
  local ok = true
  for _, c in ipairs(results.checks) do
    ok = ok and c.ok
  end
  results.ok = ok
  results.ms = ms()
  local f = assert(io.open(env.ENGRAM_OUT, 'w'))
  f:write(vim.fn.json_encode(results))
  f:close()
  if ok then
    vim.cmd('qall!')
  else
    vim.cmd('cquit 1')
  end
end

local function check(name, ok, detail)
  table.insert(results.checks, { name = name, ok = ok and true or false, detail = detail, ms = ms() })
  return ok
end

local function buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

local session = env.ENGRAM_SESSION or ''
local notes = {}
local real_notify = vim.notify
vim.notify = function(msg, level, opts)
  notes[#notes + 1] = msg
  return real_notify(msg, level, opts)
end
local engram = require('engram')
if env.ENGRAM_SETUP and env.ENGRAM_SETUP ~= '' then
  engram.setup(vim.fn.json_decode(env.ENGRAM_SETUP))
  results.setup = true
end
check('plugin loaded', vim.g.loaded_engram == true and vim.fn.exists(':EngramExplain') == 2)

local ok, err = pcall(function()
  -- 1. attach to an agent-written file
  vim.cmd('edit ' .. vim.fn.fnameescape(env.ENGRAM_FILE))
  local src = vim.api.nvim_get_current_buf()
  local src_win = vim.api.nvim_get_current_win()
  if env.ENGRAM_EXPECT_MISSING == '1' then
    -- No server anywhere: nothing attaches, and one message says how to fix it.
    vim.wait(3000, function()
      return #notes > 0
    end, 50)
    results.notes = notes
    local msg = table.concat(notes, '\n')
    check('no client', engram.client(src) == nil)
    check('says how to fix', msg:find('not found on PATH', 1, true) ~= nil and msg:find('setup(', 1, true) ~= nil, msg)
    return
  end
  local attached = vim.wait(20000, function()
    local c = engram.client(src)
    return c ~= nil and c.initialized ~= false
  end, 50)
  results.api = engram.last.api
  results.filetype = vim.bo[src].filetype
  if not check('attached', attached, engram.last.api) then
    return
  end

  -- 2. code lenses over the agent-written code, resolved by Neovim's own codelens module
  local function lenses()
    local got = vim.lsp.codelens.get(src)
    if #got == 0 then
      return nil
    end
    for _, l in ipairs(got) do
      if l.command == nil then
        return nil
      end
    end
    return got
  end
  local got = nil
  vim.wait(20000, function()
    got = lenses()
    return got ~= nil
  end, 50)
  got = got or {}
  results.lenses = vim.tbl_map(function(l)
    return { line = l.range.start.line, title = l.command and l.command.title }
  end, got)
  -- the extmarks Neovim draws (what a person sees)
  local shown = {}
  for _, ns in pairs(vim.lsp.codelens.__namespaces or {}) do
    for _, m in ipairs(vim.api.nvim_buf_get_extmarks(src, ns, 0, -1, { details = true })) do
      local chunks = m[4] and (m[4].virt_text or (m[4].virt_lines and m[4].virt_lines[1])) or {}
      local text = table.concat(vim.tbl_map(function(c)
        return c[1]
      end, chunks), '')
      if text:match('%S') then
        shown[#shown + 1] = { line = m[2], text = text }
      end
    end
  end
  results.lens_marks = shown
  local title = got[1] and got[1].command and got[1].command.title or ''
  check('lenses', #got > 0 and title:match('^why%? %d+ sessions? · Claude Code · ') ~= nil, title)
  check('lens text drawn', #shown > 0 and shown[1].text:find('why?', 1, true) ~= nil, shown[1] and shown[1].text)
  if #got == 0 or env.ENGRAM_QUICK == '1' then
    return
  end
  local lens_line = got[1].range.start.line

  -- 3. hover with the normal K
  vim.api.nvim_win_set_cursor(src_win, { lens_line + 2, 2 })
  vim.api.nvim_feedkeys('K', 'x', false)
  local hover_text
  vim.wait(15000, function()
    for _, w in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(w).relative ~= '' then
        hover_text = buf_text(vim.api.nvim_win_get_buf(w))
        if hover_text:find('Asked', 1, true) then
          return true
        end
      end
    end
    return false
  end, 50)
  results.hover = hover_text and hover_text:sub(1, 600)
  check('hover (K)', hover_text ~= nil and hover_text:find('Asked', 1, true) ~= nil
    and hover_text:find(session, 1, true) ~= nil, results.hover)
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= '' then
      vim.api.nvim_win_close(w, true)
    end
  end

  -- 4. :EngramExplain on a visual selection
  local a, b = lens_line + 1, lens_line + 6
  vim.cmd(('normal! %dGV%dG'):format(a, b))
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<Esc>', true, false, true), 'x', false)
  engram.last.explain_buf = nil
  vim.cmd("'<,'>EngramExplain")
  vim.wait(20000, function()
    return engram.last.explain_buf ~= nil
  end, 50)
  local ebuf = engram.last.explain_buf
  local etext = ebuf and buf_text(ebuf) or ''
  results.explain_head = vim.split(etext, '\n', { plain = true })
  results.explain_head = { unpack(results.explain_head, 1, 40) }
  results.explain_span = engram.last.explain and engram.last.explain.result.span
  check('explain selection', ebuf ~= nil and vim.bo[ebuf].filetype == 'markdown' and etext:find('^# Why `') ~= nil and etext:find('\n%*%*1%. [^*]+%*%* · Claude Code') ~= nil
    and etext:find(session, 1, true) ~= nil and results.explain_span and results.explain_span.start == a
    and results.explain_span['end'] == b, results.explain_span)

  -- 5. running the lens (engram.explain, handled by the plugin) opens the region's explanation
  vim.api.nvim_set_current_win(src_win)
  vim.api.nvim_win_set_cursor(src_win, { lens_line + 1, 0 })
  engram.last.explain_buf = nil
  vim.lsp.codelens.run()
  vim.wait(20000, function()
    return engram.last.explain_buf ~= nil
  end, 50)
  local span = engram.last.explain and engram.last.explain.result.span
  results.lens_span = span
  check('lens runs explain', engram.last.explain_buf ~= nil and span and span.start == lens_line + 1, span)

  -- 6. :EngramView on an event line of the explanation opens the transcript there
  local lbuf = engram.last.explain_buf
  local target_line
  for i, line in ipairs(vim.api.nvim_buf_get_lines(lbuf, 0, -1, false)) do
    if line:match('^%*%*1%. ') then  -- the first session's heading points at the touch it tells
      target_line = i
      break
    end
  end
  if check('explain has a marked touch', target_line ~= nil) then
    vim.api.nvim_set_current_win(vim.fn.bufwinid(lbuf))
    vim.api.nvim_win_set_cursor(0, { target_line, 0 })
    engram.last.view_buf = nil
    vim.cmd('EngramView')
    vim.wait(20000, function()
      return engram.last.view_buf ~= nil
    end, 50)
    local vtext = engram.last.view_buf and buf_text(engram.last.view_buf) or ''
    results.view_head = { unpack(vim.split(vtext, '\n', { plain = true }), 1, 12) }
    check('transcript view', vtext:find('#### ▶ #', 1, true) ~= nil and vtext:find(session, 1, true) ~= nil)
  end

  -- 7. a buffer with no filetype is attached too
  if env.ENGRAM_PLAIN and env.ENGRAM_PLAIN ~= '' then
    vim.cmd('edit ' .. vim.fn.fnameescape(env.ENGRAM_PLAIN))
    local pb = vim.api.nvim_get_current_buf()
    local ok_plain = vim.wait(10000, function()
      return engram.client(pb) ~= nil
    end, 50)
    check('attach without filetype', ok_plain and vim.bo[pb].filetype == '', vim.bo[pb].filetype)
    vim.cmd('buffer ' .. src)
  end

  -- 8. :EngramIngest shows progress; the index-changed notification refreshes the lenses
  engram.last.index_changed = nil
  vim.cmd('EngramIngest')
  vim.wait(60000, function()
    return engram.last.ingest ~= nil and engram.last.index_changed ~= nil
  end, 50)
  results.ingest = engram.last.ingest
  results.progress = engram.last.progress
  check('ingest with progress', engram.last.ingest ~= nil and engram.last.ingest.cancelled == false
    and #(engram.last.progress or {}) >= 2 and engram.last.index_changed ~= nil, engram.last.progress)
  local again = vim.wait(20000, function()
    return lenses() ~= nil
  end, 50)
  check('lenses after index change', again)

  -- 9. :checkhealth engram (about the file buffer the user came from)
  vim.api.nvim_set_current_win(src_win)
  vim.cmd('buffer ' .. src)
  vim.cmd('checkhealth engram')
  local htext = buf_text(vim.api.nvim_get_current_buf())
  results.health = htext:sub(1, 1200)
  check('checkhealth', htext:find('server command', 1, true) ~= nil and htext:find('store', 1, true) ~= nil)
end)
if not ok then
  check('no Lua error', false, tostring(err))
end
finish()
