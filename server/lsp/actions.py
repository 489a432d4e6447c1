"""Code actions: "Remember a note for the selection…" on any range, and, on a drifted note's
diagnostic, "Re-anchor note here" and "Forget note".

The remember action names a client command (`engram.rememberSelection`, with the document and
the selection): the editor asks for the note's text and kind with its own input, then calls the
server's `engram.remember`. The other two call the server's commands directly.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from .server import EngramLanguageServer

#: The client-side command a "remember" action runs: [uri, range] → asks text and kind, then
#: executes `engram.remember` [uri, range, text, kind].
REMEMBER_SELECTION = "engram.rememberSelection"


def _range_json(rng: types.Range) -> dict[str, Any]:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


def code_action(ls: EngramLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None:
        return None
    uri, rng = state.uri, _range_json(params.range)
    out = [types.CodeAction(title="Remember a note for the selection…",
                            command=types.Command(title="Remember a note for the selection…",
                                                  command=REMEMBER_SELECTION, arguments=[uri, rng]))]
    for diag in params.context.diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        if diag.source != "engram" or not isinstance(data.get("memory"), str):
            continue
        mid = data["memory"]
        here = _range_json(params.range if params.range.start != params.range.end else diag.range)
        out.append(types.CodeAction(title=f"Re-anchor note {mid[:8]} here", kind=types.CodeActionKind.QuickFix,
                                    diagnostics=[diag], is_preferred=True,
                                    command=types.Command(title="Re-anchor note here", command="engram.reanchor",
                                                          arguments=[mid, uri, here])))
        out.append(types.CodeAction(title=f"Forget note {mid[:8]}", kind=types.CodeActionKind.QuickFix,
                                    diagnostics=[diag],
                                    command=types.Command(title="Forget note", command="engram.forget",
                                                          arguments=[mid])))
    return out


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION)(code_action)
