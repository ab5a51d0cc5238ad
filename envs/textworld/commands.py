"""What reaches the game, and what comes back. A command is one line of plain words: the
interpreter halts on control characters, runs several commands for `.`, `,` or `then`, and
its out-of-game verbs (quit, restart, save, undo, ...) leave the game waiting on a yes/no
question or out of step with the state TextWorld tracks, and TextWorld's framework commands
(tw-..., enable print state option, restrict commands) print hidden state. Those are refused here with the
reason, as the model's mistake, and never sent."""

from __future__ import annotations

import re
import unicodedata

MAX_COMMAND_CHARS = 200
META_VERBS = frozenset(
    {"quit", "q", "restart", "save", "restore", "undo", "script", "unscript", "transcript",
     "noscript", "recording", "replay", "verify", "version",
     # TextWorld's own framework commands ("enable print state option" prints every room,
     # its contents and which key opens which lock; "restrict commands" changes the parser)
     "enable", "disable", "restrict", "print_state"}
)  # fmt: skip
_WORDS = re.compile(r"[a-z0-9' -]+")
_PROMPT = re.compile(r"(^|\n)>[^\n]*$")
"""The input prompt the interpreter ends each answer with, and the status line beside it."""
_END_MENU = "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"
_BLANK_LINES = re.compile(r"\n{3,}")


def refusal(command: str) -> str | None:
    """Why `command` cannot be sent to the game, or None when it can (as `normalize` gives
    it)."""
    if len(command) > 4 * MAX_COMMAND_CHARS:
        return f"the command is {len(command)} characters; commands are a few words (at most {MAX_COMMAND_CHARS})."
    if "\n" in command.strip() or "\r" in command.strip():
        return "one command per turn, on one line."
    text = normalize(command)
    if not text:
        return "the command is empty; write one, e.g. 'look' or 'go north'."
    if len(text) > MAX_COMMAND_CHARS:
        return f"the command is {len(text)} characters; commands are a few words (at most {MAX_COMMAND_CHARS})."
    if not _WORDS.fullmatch(text):
        return (
            "a command is plain words (letters, digits, spaces, hyphens, apostrophes), "
            "one command per turn, e.g. 'take key from chest'."
        )
    words = text.split()
    if words[0] in META_VERBS or words[0].startswith("tw-"):
        return f"'{words[0]}' is not a move in the game; play on with in-game commands."
    if "then" in words:
        return "one command per turn: 'then' would chain several."
    return None


def normalize(command: str) -> str:
    """The command as the game gets it: compatibility forms folded, lower case, spaces
    collapsed."""
    folded = unicodedata.normalize("NFKC", command.encode("utf-8", "replace").decode("utf-8"))
    return " ".join(folded.lower().split())


def clean_feedback(text: str) -> str:
    """The game's answer without its trailing prompt and status line, the out-of-game menu
    at the end, and the padding the interpreter adds."""
    text = _PROMPT.sub("", text.strip()).replace(_END_MENU, "")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
