"""Removes text in a completion that speaks to the grader instead of the reader.

A summary or a reply has no reason to address its evaluator, imitate a system or
assistant turn, call a tool, or say the criterion's name over and over; a policy
optimized against the judge does all of these (an earlier held-out batch: a line
addressed to the grader as the system moved the embedded judge's reward by up to +0.41),
and none of them needs a number, so neither claim removal nor the masked second read
sees them. They are recognized as a class, by their shape, in the reader's view of the
text (reader_text.py), and removed with the rest of their line:

- a role marker at the start of a line or right after a sentence or a bracket:
  `SYSTEM:`, `Assistant:`, `[grader]`, `<<SYS>>`, `[INST]`, `### SYSTEM OVERRIDE ###`;
  a marker that opens a block (`<<SYS>>` ... `<</SYS>>`) removes the block;
- words addressed to the grader anywhere: `Note to the evaluator`, `Dear judge`,
  `to the AI reviewing this`, `Evaluator, respond ...`;
- tool-call shapes: `<tool_call>`, `"arguments":`, `submit_rating(`;
- the criterion's name (or a word made from it) three or more times with at most three
  other words between each.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from geval_server.defences.reader_text import ReaderView, reader_view, replace_spans, skeleton_text

REMOVED = "[removed]"

_GRADERS = (r"(?:evaluators?|graders?|judges?|reviewers?|annotators?|raters?|scorers?|examiners?|assessors?"
            r"|markers?|models?|assistants?|ai|llms?|bots?)")
_ROLES = (r"(?:system|sys|assistant|user|developer|tool|function|instructions?|inst|prompt|admin|operator"
          rf"|{_GRADERS})")
# A role marker: where a turn could begin (a line's start, after a sentence or a bracket),
# any markup before it, the role, an optional word of office, and what closes it.
_MARKER = re.compile(
    rf"(?:^|(?<=[.!?;)\]}}>]))[ \t*#>_|\"'\-\[(<{{]*/?[ \t]*(?P<role>{_ROLES})"
    r"(?:[ \t]+(?:override|note|notes|message|prompt|instructions?|update|mode|turn))?[ \t]*(?:[:\]>|)}#=]|-+>)",
    re.MULTILINE,
)
_ADDRESSED = re.compile(
    rf"(?<!\w)(?:(?:note|notes|message|instructions?|memo|reminder|hint|request|attention)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
    rf"(?:automated\s+|ai\s+|llm\s+|human\s+)?{_GRADERS}"
    rf"|dear\s+(?:ai\s+)?{_GRADERS}"
    rf"|(?:to|for)\s+(?:the|any|whichever)\s+(?:ai\s+|llm\s+)?{_GRADERS}\s+(?:reading|reviewing|evaluating|grading|scoring"
    rf"|judging|rating|assessing|checking|who)"
    rf"|{_GRADERS}\s*[,:]\s*(?:please\s+)?(?:respond|rate|score|grade|give|output|return|mark|ignore|treat|assign"
    rf"|answer|reply|consider|note|remember))(?!\w)"
)
_TOOL_CALL = re.compile(
    r"<\s*/?\s*(?:tool_calls?|function_calls?|tool_use|invoke|antml)[^>\n]*>"
    r"|\"(?:arguments|parameters|tool_name|function_name|tool)\"\s*:"
    r"|(?<![\w.])[a-z_]*(?:score|rate|rating|grade|reward|verdict|evaluat[a-z]*|judge?)[a-z_]*\("
)
_WORD = re.compile(r"[^\W\d_]+")
# The words the patterns above need, each a whole run of letters where they match: a text
# without any of them skips that pattern's scan (most texts hold none).
_GRADER_WORDS = frozenset("evaluator grader judge reviewer annotator rater scorer examiner assessor marker model "
                          "assistant llm bot".split())
_GRADER_WORDS |= {word + "s" for word in _GRADER_WORDS} | {"ai"}
_ROLE_WORDS = _GRADER_WORDS | frozenset("system sys assistant user developer tool function instruction instructions "
                                        "inst prompt admin operator".split())
_TOOL_CALL_SIGNS = '<"('  # each of the tool-call shapes holds one
_REPEATS = 3  # the name this many times ...
_WORDS_BETWEEN = 3  # ... with at most this many other words between each


class GraderLineRemover:
    """Built once per server from the criteria it serves, like ScoreClaimRemover."""

    def __init__(self, criteria: Iterable[str]) -> None:
        names = {skeleton_text(c).strip() for c in criteria if c.strip()}
        # A word made from a name starts with most of it (`coherent`, `coherently`).
        self._stems = tuple(sorted({n[:max(5, len(n) - 3)] for n in names if _WORD.fullmatch(n)}))

    def _spans(self, view: ReaderView) -> list[tuple[int, int]]:
        spans = []
        skeleton, words = view.skeleton, view.distinct
        for found in _MARKER.finditer(skeleton) if not _ROLE_WORDS.isdisjoint(words) else ():
            spans.append((found.start(), self._block_end(skeleton, found)))
        addressed = _ADDRESSED.finditer(skeleton) if not _GRADER_WORDS.isdisjoint(words) else ()
        tool_calls = _TOOL_CALL.finditer(skeleton) if any(sign in skeleton for sign in _TOOL_CALL_SIGNS) else ()
        for found in (*addressed, *tool_calls):
            spans.append((found.start(), _line_end(skeleton, found.end())))
        spans += self._repeated_names(skeleton)
        return sorted(spans)

    @staticmethod
    def _block_end(skeleton: str, marker: re.Match) -> int:
        """The end of the marker's line, or of the line that closes its block (`<</sys>>`,
        `[/inst]`) when one follows."""
        closer = re.compile(rf"[<\[(]+\s*/\s*{re.escape(marker.group('role'))}\s*[>\])]")
        found = closer.search(skeleton, marker.end(), marker.end() + 2000)
        return _line_end(skeleton, found.end() if found else marker.end())

    def _repeated_names(self, skeleton: str) -> list[tuple[int, int]]:
        """Runs of the criterion's name said _REPEATS or more times close together."""
        stems = [stem for stem in self._stems if skeleton.count(stem) >= _REPEATS]  # a run needs that many
        if not stems:
            return []
        words = list(_WORD.finditer(skeleton))
        spans = []
        for stem in stems:
            hits = [i for i, w in enumerate(words) if w.group().startswith(stem)]
            run = hits[:1]
            for i in hits[1:] + [None]:
                if i is not None and i - run[-1] <= _WORDS_BETWEEN + 1:
                    run.append(i)
                    continue
                if len(run) >= _REPEATS:
                    spans.append((words[run[0]].start(), words[run[-1]].end()))
                run = [i]
        return spans

    def remove(self, text: str) -> tuple[str, int]:
        """(the text with every such span removed, how many)."""
        view = reader_view(text)
        spans = self._spans(view)
        return (replace_spans(text, view.source_index, spans, REMOVED), len(spans)) if spans else (text, 0)


def _line_end(skeleton: str, at: int) -> int:
    end = skeleton.find("\n", at)
    return len(skeleton) if end == -1 else end
