"""Continuity: what a new session needs to pick up where another stopped, derived from the tapes.

`engram resume` reads the tapes of a session and of the sessions it continues (compactions,
resumed sessions: the index's continuation edges), and gives the person's requests, the agent's
last words, the harness's own plan, the files touched with their state in the working tree now,
the commands run with their last outcome, the failures no later run fixed, and the side effects
already done that must not be done twice. No model reads or writes any of it: every item is a
fact of the transcript with the `tape@offset` it is at (`chain` finds the tapes, `facts` reads
them in one pass, `commands` sorts shell commands, `mentions` ranks the files named but not
touched yet, `related` those the repository's git relates to the files edited, `package` fits
them to a token budget, `text` writes them for people and as a first prompt). `handoff` keeps and checks explicit notes; `tasks` groups sessions toward one goal and
keeps each package and note handed over as a checkpoint."""
