-- Markdown for people from the server's results. Pure Lua (no editor state), Neovim 0.7+.
local M = {}

local HARNESS = {
  ['claude-code'] = 'Claude Code',
  codex = 'Codex',
  editor = 'editor',
  raw = 'text',
  record = 'recorded command',
}

function M.harness(h)
  if h == nil or h == vim.NIL then
    return 'unknown harness'
  end
  return HARNESS[h] or h
end

local function str(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  return v
end

function M.when(ts)
  ts = str(ts)
  if not ts then
    return 'unknown time'
  end
  local d, t = ts:match('^(%d%d%d%d%-%d%d%-%d%d)T(%d%d:%d%d)')
  return d and (d .. ' ' .. t .. ' UTC') or ts
end

local function clock(ts)
  ts = str(ts) or ''
  return ts:match('T(%d%d:%d%d:%d%d)') or ''
end

local function plural(n, word, many)
  return n .. ' ' .. (n == 1 and word or (many or word .. 's'))
end

local function is_ref(v)
  return type(v) == 'table' and v['$obj'] ~= nil
end

local function text_of(v)
  if is_ref(v) then
    return ('<%d characters in object %s>'):format(v.len or 0, tostring(v['$obj']):sub(1, 12))
  end
  v = str(v)
  if v == nil then
    return ''
  end
  if type(v) == 'string' then
    return v
  end
  return vim.fn.json_encode(v)
end

--- The first lines of a text joined on one line, cut at `limit` characters.
function M.one_line(v, limit)
  limit = limit or 140
  local parts = {}
  for line in (text_of(v):gsub('\r', '') .. '\n'):gmatch('([^\n]*)\n') do
    line = vim.trim(line)
    if line ~= '' then
      parts[#parts + 1] = line
      if #parts == 3 then
        break
      end
    end
  end
  local s = table.concat(parts, ' ⏎ ')
  if vim.fn.strchars(s) > limit then
    s = vim.fn.strcharpart(s, 0, limit - 1) .. '…'
  end
  return s
end

local function range_text(r)
  r = str(r)
  if type(r) ~= 'table' or #r < 2 then
    return '?'
  end
  if r[2] >= r[1] then
    return r[1] .. '–' .. r[2]
  end
  return '∅ before ' .. r[1]
end

local function tool_arg(input)
  if type(input) ~= 'table' then
    return ''
  end
  local arg = str(input.command) or str(input.file_path) or str(input.path) or str(input.pattern)
    or str(input.description) or str(input.query) or ''
  return M.one_line(arg, 100)
end

--- One line describing an event.
function M.event_summary(ev, without_output)
  local who = str(ev.agent) and (' [' .. ev.agent .. ']') or ''
  local k = ev.kind
  if k == 'meta' then
    return ('session start%s %s · %s'):format(who, M.harness(ev.harness), str(ev.model) or 'unknown model')
  elseif k == 'msg.in' then
    return ('user%s: %s'):format(who, M.one_line(ev.text))
  elseif k == 'msg.out' then
    return ((str(ev.block) == 'thinking') and 'thinking' or 'assistant') .. who .. ': ' .. M.one_line(ev.text)
  elseif k == 'tool.call' then
    local arg = tool_arg(ev.input)
    if arg ~= '' and not arg:find('`', 1, true) then
      arg = '`' .. arg .. '`'
    end
    return ('tool call%s `%s`%s'):format(who, str(ev.name) or '?', arg ~= '' and (' ' .. arg) or '')
  elseif k == 'tool.result' then
    local status = ev.is_error == true and 'error' or 'ok'
    local code = str(ev.exit_code) and (' exit ' .. tostring(ev.exit_code)) or ''
    local out = (str(ev.stdout) and not without_output) and (': ' .. M.one_line(ev.stdout, 100)) or ''
    return ('result%s %s%s%s%s'):format(who, str(ev.name) and ('`' .. ev.name .. '` ') or '', status, code, out)
  elseif k == 'code.read' then
    return ('read%s `%s` lines %s'):format(who, tostring(ev.file), range_text(ev.range))
  elseif k == 'code.edit' then
    return ('edit%s %s `%s` %s → %s'):format(who, str(ev.op) or '', tostring(ev.file), range_text(ev.before_range),
      range_text(ev.after_range))
  elseif k == 'compact' then
    return ('compaction%s (%s)'):format(who, str(ev.trigger) or '?')
  end
  return tostring(k) .. who
end

--- What a touch did to the code, in words.
function M.touch_label(f)
  local where = ''
  if str(f.file) then
    where = ' `' .. f.file .. '`' .. (str(f.lines) and (' lines ' .. range_text(f.lines)) or '')
  end
  local k = f.kind
  if k == 'code.edit' then
    return 'wrote' .. where
  elseif k == 'code.read' then
    return 'read' .. where
  elseif k == 'tool.call' then
    for _, ev in ipairs(str(f.window) or {}) do
      if ev.offset == f.offset and str(ev.name) then
        return ('a `%s` call held it'):format(ev.name)
      end
    end
    return 'a tool call held it'
  elseif k == 'tool.result' then
    return 'saw it in tool output'
  elseif k == 'msg.in' then
    return 'the user quoted it'
  elseif k == 'msg.out' then
    return 'discussed it'
  end
  return tostring(k) .. where
end

local function split_lines(s)
  local out = {}
  s = s:gsub('\r', ''):gsub('\n$', '')
  for line in (s .. '\n'):gmatch('([^\n]*)\n') do
    out[#out + 1] = line
  end
  return out
end

--- The explain document. Returns its lines and, per line, the transcript position it points at
--- ({tape, offset}) so that <CR> can open it.
function M.explain(res, opts)
  opts = opts or {}
  local doc = res.result
  local lines, targets = {}, {}
  local function add(line, target)
    lines[#lines + 1] = line
    if target then
      targets[#lines] = target
    end
  end
  local span = doc.span
  local which = span.start == span['end'] and ('line ' .. span.start) or ('lines ' .. span.start .. '–' .. span['end'])
  add(('# Why does `%s` %s exist?'):format(span.file, which))
  add('')
  local n = #doc.sessions
  if n == 0 then
    add('No recorded session wrote, read or discussed this code.')
  else
    add(('**%s** wrote, read or discussed this code%s. Windows: %d events before, %d after each touch.')
      :format(plural(n, 'session'), doc.truncated == true and ' (only the first shown)' or '', opts.before or 3,
        opts.after or 3))
    add('<CR> on an event opens the transcript there, `+` widens the windows, `q` closes.')
  end
  add('')
  if str(res.text) then
    local code = split_lines(res.text)
    add('```' .. (opts.language or ''))
    for i = 1, math.min(#code, 12) do
      add(code[i])
    end
    if #code > 12 then
      add(('… %d more lines'):format(#code - 12))
    end
    add('```')
    add('')
  end
  for i, s in ipairs(doc.sessions) do
    add('---')
    add('')
    add(('## %d. %s · %s · %s · %s'):format(i, M.harness(s.harness), M.when(s.last_touch), str(s.model) or 'unknown model',
      plural(s.touches or 0, 'touch', 'touches')), { s.tape, 0 })
    add('')
    add(('Session `%s` · tape `%s`'):format(s.session_id, s.tape:sub(1, 12)), { s.tape, 0 })
    add('')
    for j, f in ipairs(s.fragments or {}) do
      add(('### %d.%d %s · %s · confidence %.2f (%s) · #%d'):format(i, j, M.touch_label(f), M.when(f.timestamp),
        tonumber(f.confidence) or 0, tostring(f.via), f.offset), { f.tape, f.offset })
      add('')
      local window = str(f.window) or {}
      for _, ev in ipairs(window) do
        local mark = ev.offset == f.offset and '▶ ' or ''
        add(('- %s`#%d` %s %s'):format(mark, ev.offset, clock(ev.ts), M.event_summary(ev)), { f.tape, ev.offset })
      end
      if #window > 0 then
        add('')
      end
    end
  end
  local lineage = str(doc.lineage)
  if type(lineage) == 'table' and (tonumber(lineage.edges_followed) or 0) > 0 then
    add('---')
    add('')
    add(('Lineage: followed %s from earlier versions of this code.'):format(plural(lineage.edges_followed, 'edge')))
  end
  return lines, targets
end

--- The explain document the server rendered (`res.markdown`), and per line the transcript position
--- it points at (`res.targets`: {line (0-based), tape, offset}), so that <CR> can open it.
function M.served(res)
  local lines = split_lines(res.markdown)
  local targets = {}
  for _, t in ipairs(type(res.targets) == 'table' and res.targets or {}) do
    if type(t) == 'table' and tonumber(t[1]) and type(t[2]) == 'string' then
      targets[t[1] + 1] = { t[2], tonumber(t[3]) or 0 }
    end
  end
  return lines, targets
end

local function fence(out, text, max, lang)
  local ls = split_lines(text)
  local tick = text:find('```', 1, true) and '~~~~' or '```'
  out[#out + 1] = tick .. (lang or '')
  for i = 1, math.min(#ls, max) do
    out[#out + 1] = ls[i]
  end
  if #ls > max then
    out[#out + 1] = ('… %d more lines'):format(#ls - max)
  end
  out[#out + 1] = tick
end

--- A transcript window: every event in full.
function M.view(v, opts)
  opts = opts or {}
  local out = {}
  local events = v.events or {}
  local first = events[1] and events[1].offset or v.at
  local last = events[#events] and events[#events].offset or v.at
  if opts.whole then
    out[#out + 1] = ('# Transcript of session `%s`'):format(v.session_id)
  else
    out[#out + 1] = ('# Session `%s` around event #%d'):format(v.session_id, v.at)
  end
  out[#out + 1] = ''
  out[#out + 1] = ('Tape `%s` · events #%d–#%d · `[` earlier, `]` later, `q` closes'):format(v.tape:sub(1, 12), first, last)
  out[#out + 1] = ''
  out[#out + 1] = '---'
  out[#out + 1] = ''
  for _, ev in ipairs(events) do
    local mark = (not opts.whole and ev.offset == v.at) and '▶ ' or ''
    local title
    if ev.kind == 'msg.in' then
      title = 'user'
    elseif ev.kind == 'msg.out' then
      title = str(ev.block) == 'thinking' and 'thinking' or 'assistant'
    else
      title = M.event_summary(ev, true)
    end
    out[#out + 1] = ('#### %s#%d · %s · %s'):format(mark, ev.offset, clock(ev.ts), title)
    out[#out + 1] = ''
    if ev.kind == 'msg.in' or ev.kind == 'msg.out' then
      local ls = split_lines(text_of(ev.text))
      for i = 1, math.min(#ls, 80) do
        out[#out + 1] = ls[i]:match('%S') and ('> ' .. ls[i]) or '>'
      end
      if #ls > 80 then
        out[#out + 1] = ('> … %d more lines'):format(#ls - 80)
      end
    elseif ev.kind == 'tool.call' then
      local input = type(ev.input) == 'table' and ev.input or {}
      local body = str(input.content) or str(input.new_string) or str(input.command) or str(input.patch)
      if body then
        fence(out, text_of(body), 40)
      elseif next(input) then
        fence(out, vim.fn.json_encode(input), 20, 'json')
      end
    elseif ev.kind == 'tool.result' then
      if str(ev.stdout) then
        fence(out, text_of(ev.stdout), 30)
      end
      if str(ev.stderr) and ev.stderr ~= '' then
        out[#out + 1] = 'stderr:'
        fence(out, text_of(ev.stderr), 15)
      end
    elseif ev.kind == 'code.read' then
      if str(ev.text) then
        fence(out, text_of(ev.text), 30)
      end
    elseif ev.kind == 'code.edit' then
      local diff = {}
      for _, l in ipairs(str(ev.before_text) and split_lines(text_of(ev.before_text)) or {}) do
        diff[#diff + 1] = '-' .. l
      end
      for _, l in ipairs(str(ev.after_text) and split_lines(text_of(ev.after_text)) or {}) do
        diff[#diff + 1] = '+' .. l
      end
      if #diff > 0 then
        fence(out, table.concat(diff, '\n'), 50, 'diff')
      end
    end
    out[#out + 1] = ''
  end
  return out
end

local LANGUAGES = {
  py = 'python', ts = 'typescript', tsx = 'tsx', js = 'javascript', rs = 'rust', go = 'go', rb = 'ruby',
  ex = 'elixir', exs = 'elixir', java = 'java', c = 'c', h = 'c', cpp = 'cpp', sh = 'bash', lua = 'lua',
  json = 'json', yml = 'yaml', yaml = 'yaml', toml = 'toml', md = 'markdown',
}

function M.language(file)
  local ext = tostring(file):match('%.([%w]+)$')
  return ext and LANGUAGES[ext:lower()] or ''
end

return M
