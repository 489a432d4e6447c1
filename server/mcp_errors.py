"""MCP tool arguments that do not fit a tool's input schema, said in one sentence an agent can act
on: which parameter, what it must be, what it was given.

The SDK reports pydantic's validation error as is (`1 validation error for explainArguments ...
[type=int_parsing, ...] For further information visit https://errors.pydantic.dev/...`), which
names the parameter only on a line of its own and spends an agent's tokens on a URL. The sentence
is built from the tool's published input schema, so it says what `tools/list` says."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

MAX_SHOWN = 40  # characters of a rejected string quoted back


class ArgumentCheckingServer(MCPServer):
    """An MCPServer whose tools answer a wrong, missing or unknown argument with one sentence
    (`argument_error`, `unknown_arguments`)."""

    _parameters: dict[str, list[str]] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._parameters is None:  # (the tools are all registered before the first call)
            self._parameters = {t.name: list((t.input_schema or {}).get("properties") or {})
                                for t in await self.list_tools()}
        known = self._parameters.get(name)
        if known is not None and isinstance(arguments, dict) and (extra := [k for k in arguments if k not in known]):
            raise ToolError(unknown_arguments(name, known, extra))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            tool = next((t for t in await self.list_tools() if t.name == name), None)
            schema = tool.input_schema if tool is not None else {}
            raise ToolError(argument_error(name, schema, cause)) from cause  # (the SDK logs the fields)


def unknown_arguments(tool: str, known: list[str], extra: list[str]) -> str:
    """The sentence for arguments a tool does not take: the SDK dropped them without a word, so a
    misnamed one (`next` for `next_steps`) was lost while the call succeeded."""
    import difflib  # noqa: PLC0415

    parts = []
    for name in extra:
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or [k for k in known if k.startswith(name)][:1]
        parts.append(f"`{name[:MAX_SHOWN]}`" + (f" (did you mean `{near[0]}`?)" if near else ""))
    return (f"{tool}: no argument {', '.join(parts)}; it takes "
            + (", ".join(f"`{k}`" for k in known) or "none") + ".")


def argument_error(tool: str, schema: dict[str, Any], error: ValidationError) -> str:
    """One sentence for the arguments `error` rejects: "explain: the argument `start_line` must be
    an integer of at least 1, not the string 'abc'." """
    props = schema.get("properties") or {}
    parts = []
    for err in error.errors():
        loc = [str(p) for p in err.get("loc", ())]
        name = ".".join(loc) or "?"
        expected = describe(_at(props, loc)) if loc else "as the tool's input schema says"
        if err.get("type") == "missing":
            parts.append(f"`{name}` is missing: it must be {expected}")
        else:
            parts.append(f"`{name}` must be {expected}, not {given(err.get('input'))}")
    return f"{tool}: " + "; ".join(f"the argument {part}" for part in parts) + "."


def _at(props: dict[str, Any], loc: list[str]) -> dict[str, Any]:
    """The schema of the value at `loc` (["tags", "0"]: an item of `tags`): an item's own type is
    what it must be, not its list's."""
    prop = props.get(loc[0], {})
    for part in loc[1:]:
        options = [o for o in prop.get("anyOf") or prop.get("oneOf") or [prop] if o.get("type") != "null"]
        inner = next((o for o in options if "items" in o or "properties" in o), None)
        if inner is None:
            break
        prop = inner["items"] if "items" in inner else (inner.get("properties") or {}).get(part, {})
    return prop


def describe(prop: dict[str, Any]) -> str:
    """What a JSON schema property accepts, in words: "an integer from 0 to 20", "one of "a", "b"."""
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        kinds = [describe(o) for o in options if o.get("type") != "null"]
        nullable = any(o.get("type") == "null" for o in options)
        return " or ".join(kinds) + (", or null" if nullable else "")
    if "enum" in prop:
        return "one of " + ", ".join(_json(v) for v in prop["enum"])
    if "const" in prop:
        return _json(prop["const"])
    kind = prop.get("type")
    words = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
             "array": "a list", "object": "an object", "null": "null"}
    text = words.get(kind, "a value of the schema's type") if isinstance(kind, str) else "a value of the schema's type"
    if kind in ("integer", "number"):
        text += _bounds(prop)
    return text


def _bounds(prop: dict[str, Any]) -> str:
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum", prop.get("exclusiveMaximum"))
    if "exclusiveMinimum" in prop and "minimum" not in prop:
        return f" greater than {low}" + (f" and at most {high}" if high is not None else "")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    if high is not None:
        return f" of at most {high}"
    return ""


def given(value: Any) -> str:
    """A rejected value, shortly: "the string 'abc'", "1.5", "null", "a list"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return _json(value)
    if isinstance(value, str):
        shown = value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "…"
        return f"the string {shown!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _json(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return f'"{value}"' if isinstance(value, str) else str(value)
