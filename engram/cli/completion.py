"""`engram completion bash|zsh|fish`: shell completion scripts generated from the argparse tree,
so a command or option added to the parser completes without anyone editing a script.

Each script completes the global options and the commands, then a command's options, the values
of options and positionals that have choices (`setup claude|codex`, `--rank`), and file names
elsewhere (a span, a transcript). The language server's and MCP server's own options are parsed
by them, not by argparse, so only their names complete."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] | None
    files: bool  # a value that is a path (not a number)
    repeats: bool
    dirs: bool = False  # a value that is a directory (metavar DIR)


@dataclass
class Positional:
    name: str
    choices: list[str] | None
    optional: bool
    many: bool


@dataclass
class Command:
    name: str
    help: str
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


def describe(parser: argparse.ArgumentParser, name: str = "engram", help: str = "") -> Command:
    """The parts of `parser` a completion script needs, its subcommands' included."""
    cmd = Command(name, help)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            cmd.commands = [describe(p, n, helps.get(n, "")) for n, p in action.choices.items()]
        elif action.option_strings:
            takes = action.nargs != 0
            choices = [str(c) for c in action.choices] if action.choices else None
            cmd.options.append(Option(list(action.option_strings), _plain(action.help), takes, choices,
                                      files=takes and action.type is None,
                                      repeats=isinstance(action, (argparse._AppendAction, argparse._CountAction)),
                                      dirs=action.metavar == "DIR"))
        else:
            many = action.nargs in ("*", "+", argparse.REMAINDER)
            cmd.positionals.append(Positional(str(action.metavar or action.dest),
                                              [str(c) for c in action.choices] if action.choices else None,
                                              optional=action.nargs in ("?", "*", argparse.REMAINDER), many=many))
    return cmd


def _plain(text: str | None) -> str:
    """A help string as one line, a long one without its parenthesis (a shell shows one line)."""
    text = " ".join((text or "").split())
    return text.split(" (", 1)[0] if len(text) > 70 else text


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` (bash, zsh or fish)."""
    tree = describe(parser)
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](tree)


# ---------------------------------------------------------------- bash


def bash(tree: Command) -> str:
    """The command path typed so far (`memory list`: a command of a command group) picks the case
    that completes the word under the cursor."""
    groups = [c for c in tree.commands if c.commands]
    value_opts = sorted({f for c in [tree, *groups] for o in c.options if o.takes_value for f in o.flags})
    lines = [
        "# engram completion for bash: `source <(engram completion bash)` in ~/.bashrc, or save it as",
        "# ~/.local/share/bash-completion/completions/engram",
        "_engram() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
        "    COMPREPLY=()",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {'|'.join(value_opts) or '--'}) ((i++)) ;;",
        "            -*) ;;",
        '            *) cmd="${cmd:+$cmd }${COMP_WORDS[i]}"',
        f'               case "$cmd" in {"|".join(g.name for g in groups) or "--"}) ;; *) break ;; esac ;;',
        "        esac",
        "    done",
        '    case "$cmd" in',
        '        "")',
        *_bash_body(tree, words=[c.name for c in tree.commands], indent=12),
        "            ;;",
    ]
    for cmd in tree.commands:
        for path, c in [(cmd.name, cmd), *((f"{cmd.name} {sub.name}", sub) for sub in cmd.commands)]:
            choices = next((p.choices for p in c.positionals if p.choices), None)
            words = [sub.name for sub in c.commands] + (choices or [])
            lines += [f'        "{path}")', *_bash_body(c, words=words, indent=12), "            ;;"]
    lines += ["    esac", "}", "complete -o default -F _engram engram", ""]
    return "\n".join(lines)


def _bash_body(cmd: Command, words: list[str], indent: int) -> list[str]:
    """Complete the value of the option just typed, else an option, else `words` (no words:
    readline's file names, `complete -o default`)."""
    pad = " " * indent
    out = []
    for o in cmd.options:
        if o.takes_value:
            values = (f'COMPREPLY=($(compgen -W "{" ".join(o.choices)}" -- "$cur"))' if o.choices
                      else 'COMPREPLY=($(compgen -d -- "$cur"))' if o.dirs else ":")
            out.append(f"{pad}    {'|'.join(o.flags)}) {values}; return ;;")
    if out:
        out = [f'{pad}case "$prev" in', *out, f"{pad}esac"]
    flags = " ".join(f for o in cmd.options for f in o.flags)
    out.append(f'{pad}if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{flags}" -- "$cur"))')
    if words:
        out.append(f'{pad}else COMPREPLY=($(compgen -W "{" ".join(words)}" -- "$cur"))')
    out.append(f"{pad}fi")
    return out


# ---------------------------------------------------------------- zsh


def _zq(text: str, brackets: bool = True) -> str:
    """`text` inside a single-quoted zsh word; in an _arguments description (`brackets`), with
    its brackets escaped."""
    text = text.replace("'", "'\\''")
    return text.replace("[", "\\[").replace("]", "\\]") if brackets else text


def zsh(tree: Command) -> str:
    lines = [
        "#compdef engram",
        "# engram completion for zsh: `source <(engram completion zsh)` in ~/.zshrc (after compinit),",
        "# or save it as _engram in a directory of $fpath",
        "_engram() {",
        '    local curcontext="$curcontext" state line',
        "    typeset -A opt_args",
        "    local -a commands",
        "    commands=(",
        *[f"        {_zsh_word(c)}" for c in tree.commands],
        "    )",
        "    _arguments -C \\",
        *[f"        {spec} \\" for spec in _zsh_options(tree)],
        "        '1:command:->command' \\",
        "        '*::argument:->argument' && return",
        '    case "$state" in',
        "        command) _describe -t commands 'engram command' commands ;;",
        "        argument)",
        '            case "$words[1]" in',
    ]
    for cmd in tree.commands:
        lines += _zsh_group(cmd) if cmd.commands else [
            f"                {cmd.name}) _arguments {' '.join(_zsh_options(cmd) + _zsh_positionals(cmd))} ;;"]
    lines += [
        "            esac",
        "            ;;",
        "    esac",
        "}",
        'if [ "$funcstack[1]" = "_engram" ]; then _engram "$@"; else compdef _engram engram; fi',
        "",
    ]
    return "\n".join(lines)


def _zsh_group(cmd: Command) -> list[str]:
    """A command group's case (`memory`): its options and commands, then each command's own
    (`_arguments -C` moves the words on past the group's name, as the top level's does)."""
    pad = " " * 16
    return [
        f"{pad}{cmd.name})",
        f"{pad}    local -a subcommands",
        f"{pad}    subcommands=({' '.join(_zsh_word(c) for c in cmd.commands)})",
        f"{pad}    _arguments -C {' '.join(_zsh_options(cmd))} '1:command:->command' '*::argument:->argument' && return",
        f'{pad}    case "$state" in',
        f"{pad}        command) _describe -t commands 'engram {cmd.name} command' subcommands ;;",
        f'{pad}        argument) case "$words[1]" in',
        *[f"{pad}            {sub.name}) _arguments {' '.join(_zsh_options(sub) + _zsh_positionals(sub))} ;;"
          for sub in cmd.commands],
        f"{pad}        esac ;;",
        f"{pad}    esac",
        f"{pad}    ;;",
    ]


def _zsh_word(cmd: Command) -> str:
    """`name:help` as one single-quoted zsh word, for _describe."""
    return f"'{_zq(cmd.name, False)}:{_zq(cmd.help, False)}'"


def _zsh_options(cmd: Command) -> list[str]:
    specs = []
    for o in cmd.options:
        value = ""
        if o.takes_value:
            action = (f"({' '.join(o.choices)})" if o.choices else "_files -/" if o.dirs else "_files" if o.files
                      else " ")
            value = f":{_zq(o.flags[-1].lstrip('-'))}:{action}"
        for flag in o.flags:
            specs.append(f"'{'*' if o.repeats else ''}{flag}[{_zq(o.help)}]{value}'")
    return specs


def _zsh_positionals(cmd: Command) -> list[str]:
    specs = []
    for n, p in enumerate(cmd.positionals, 1):
        action = f"({' '.join(p.choices)})" if p.choices else "_files"
        name = _zq(p.name.lower())
        specs.append(f"'*:{name}:{action}'" if p.many else f"'{n}:{':' if p.optional else ''}{name}:{action}'")
    return specs


# ---------------------------------------------------------------- fish


def _fq(text: str) -> str:
    """`text` as a single-quoted fish string."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(tree: Command) -> str:
    """Each completion's condition is the command path typed so far (`__engram_at memory list`),
    found by `__engram_path` skipping options and their values: `engram memory show` is not
    `engram show`."""
    groups = [c for c in tree.commands if c.commands]
    value_opts = sorted({f for c in [tree, *groups] for o in c.options if o.takes_value for f in o.flags})
    lines = [
        "# engram completion for fish: `engram completion fish | source`, or save it as",
        "# ~/.config/fish/completions/engram.fish",
        "function __engram_path",
        "    set -l words (commandline -opc)",
        "    set -l path",
        "    set -l skip 0",
        "    for w in $words[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $w",
        f"            case {' '.join(_fq(f) for f in value_opts) or _fq('--')}",
        "                set skip 1",
        "            case '-*'",
        "            case '*'",
        "                set path $path $w",
        f"                if test (count $path) -ge 2; or not contains -- $path[1] {' '.join(g.name for g in groups)}",
        "                    break",
        "                end",
        "        end",
        "    end",
        '    echo "$path"',
        "end",
        "function __engram_at",
        "    set -l path (__engram_path)",
        '    test "$path" = "$argv"',
        "end",
        "complete -c engram -f",
    ]
    lines += _fish_command(tree, _fq("__engram_at"))
    for cmd in tree.commands:
        lines += _fish_command(cmd, _fq(f"__engram_at {cmd.name}"))
        for sub in cmd.commands:
            lines += _fish_command(sub, _fq(f"__engram_at {cmd.name} {sub.name}"))
    return "\n".join(lines) + "\n"


def _fish_command(cmd: Command, cond: str) -> list[str]:
    """A command's options, its commands and its positionals, where `cond` holds."""
    lines = _fish_options(cmd, cond)
    lines += [f"complete -c engram -n {cond} -a {_fq(sub.name)} -d {_fq(sub.help)}" for sub in cmd.commands]
    for p in cmd.positionals:
        if p.choices:
            lines.append(f"complete -c engram -n {cond} -x -a {_fq(' '.join(p.choices))}")
        elif not cmd.commands:
            lines.append(f"complete -c engram -n {cond} -F")
    return lines


def _fish_options(cmd: Command, cond: str) -> list[str]:
    out = []
    for o in cmd.options:
        parts = [f"complete -c engram -n {cond}"]
        for flag in o.flags:
            parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
        if o.takes_value:
            parts.append(f"-x -a {_fq(' '.join(o.choices))}" if o.choices
                         else "-x -a '(__fish_complete_directories)'" if o.dirs else "-r -F" if o.files else "-x")
        parts.append(f"-d {_fq(o.help)}")
        out.append(" ".join(parts))
    return out
