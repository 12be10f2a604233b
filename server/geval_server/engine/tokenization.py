"""The judge's tokenizer as the prompt builder needs it: our own text (chat template,
rubric, form), whose control tokens count, and user text (prompt, completion,
reference), whose never do. Every piece is encoded as a continuation of what comes
before it, so the assembled prompt decodes to exactly the intended text.

The tokenizer's own `encode` cannot do this for every family:
- `split_special_tokens=True` protects only tokens flagged special. Gemma's `<|channel>`
  and `<|tool_call>` (added, user-defined pieces that its own template writes) and
  Phi-3's `</s>` are not flagged, and parse as control tokens inside a completion.
- SentencePiece tokenizers (Llama-2, Mistral v0.3, Phi-3) put `▁` (a space) in front of
  each encode call, legacy ones also after every special token, so pieces encoded on
  their own get a stray space at every join.
- MistralCommonBackend (a checkpoint with `tekken.json`, mistral-common installed) has
  no split_special_tokens and no `chat_template`, though it renders Mistral's own
  instruct format.

So control tokens are handled here, not by the tokenizer: they are every added token
of the vocabulary (flagged special or not) and every special token. Our text is split
at their strings, which become their ids; text between them, and all user text, goes
through an encoder that never produces a control id and adds no leading space (for a
tokenizers-backed tokenizer, a copy of its pipeline with every added token treated as
text and the prefix space removed; mistral-common's encoder already works that way).
A vocabulary that adds ordinary characters as tokens (some do) then writes them in user
text with its base vocabulary: the same text, other ids. Only text at the very start of
a prompt gets the tokenizer's start-of-text treatment (SentencePiece's `▁` before the
first word), as the model saw in training.

BOS: with a chat template, the prompt starts as the template renders it (as
`apply_chat_template(tokenize=True)` and vLLM's chat endpoint do); without one, it
starts with what the tokenizer itself puts in front of a text (Llama, Gemma, Mistral
and Phi-3 tokenizers add BOS, Qwen's adds nothing).

Templates that write today's date (Llama-3.2) are rendered with a pinned clock, so the
prompt, and the rubric's content hash with it, are the same on every day and machine.

A tokenizer that fails any of these properties is refused when the judge starts
(JudgeTokenizerError), never discovered on the first Score call.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import re
import unicodedata
from typing import Protocol

_USER_SLOT = "\x00GEVAL_USER_CONTENT\x00"
# The clock a chat template reads (`strftime_now`): the date Meta's Llama-3 templates fall back to.
PINNED_DATE = datetime.datetime(2024, 7, 26)
# Texts the start-up check encodes in pieces: each join must decode as the text written.
_JOIN_PROBES = (
    ("Summary:\n\n<evaluated_text>\n", "The cat sat.", "\n</evaluated_text>\n\n"),
    ("- Coherence:", " 4", "\n"),
    ("a", "\n\nb", " c"),
)


class JudgeTokenizerError(ValueError):
    """The judge's tokenizer cannot be driven safely; raised when the judge starts."""


class _TextEncoder(Protocol):
    def start(self, text: str) -> list[int]:
        """Text at the very start of a prompt, as the tokenizer begins a text."""

    def continuation(self, text: str) -> list[int]:
        """Text that follows other tokens: no leading space added, no control token parsed."""


class _TokenizersText:
    """A copy of a tokenizers-backed tokenizer's pipeline with every added token as plain text
    and no prefix space; text at the start of a prompt gets the space the tokenizer adds there."""

    def __init__(self, backend) -> None:
        from tokenizers import AddedToken, normalizers, pre_tokenizers

        self._tokenizer = copy.deepcopy(backend)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        # Flagged special, an added token is not matched in text under encode_special_tokens.
        self._tokenizer.add_special_tokens([
            AddedToken(t.content, single_word=t.single_word, lstrip=t.lstrip, rstrip=t.rstrip,
                       normalized=t.normalized, special=True)
            for t in backend.get_added_tokens_decoder().values()
        ])
        self._tokenizer.encode_special_tokens = True
        self._prefix_space = False
        for part, without, module in (("normalizer", _without_prepend, normalizers),
                                      ("pre_tokenizer", _without_prefix_space, pre_tokenizers)):
            component = getattr(backend, part)
            if component is None:
                continue
            spec = json.loads(component.__getstate__())
            if without(spec) != spec:
                setattr(self._tokenizer, part, _component(module, without(spec)))
                self._prefix_space = True
        self.pieces = _PieceEncoder.for_pipeline(self._tokenizer)  # None: every text is encoded whole

    def start(self, text: str) -> list[int]:
        return self.continuation(" " + text if self._prefix_space else text)

    def continuation(self, text: str) -> list[int]:
        if self.pieces is not None:
            ids = self.pieces.encode(text)
            if ids is not None:
                return ids
        return self.whole(text)

    def whole(self, text: str) -> list[int]:
        """The text through the tokenizers pipeline in one piece (what the piece encoder must equal)."""
        return self._tokenizer.encode(text, add_special_tokens=False).ids


# GPT-2's split, which the byte-level pre-tokenizer applies when `use_regex` is set.
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# The characters the piece encoder takes: printable ASCII, tab and line breaks, Latin-1's
# letters and signs, and the common typographic punctuation (dashes, curly quotes, bullet,
# ellipsis, per mille, euro). Their Unicode classes (letter, number, space) have not changed
# in decades, so a split pattern means the same for them in Python's `re` and in the
# tokenizers library's engine; the only spaces among them are ASCII's.
_PLAIN = "\t\n\r" + "".join(map(chr, [*range(0x20, 0x7F), *range(0xA1, 0x100), *range(0x2010, 0x2028),
                                       *range(0x2030, 0x203B), 0x20AC]))
_NOT_PLAIN = re.compile(f"[^{re.escape(_PLAIN)}]")
_LETTERS = re.escape("".join(c for c in _PLAIN if unicodedata.category(c).startswith("L")))
_NUMBERS = re.escape("".join(c for c in _PLAIN if unicodedata.category(c).startswith("N")))
# Groups that mean the same in both engines: plain, case-insensitive, lookaround, atomic.
_GROUPS = ("(?:", "(?i:", "(?=", "(?!", "(?<=", "(?<!", "(?>")
_PIECES_KEPT = 1 << 17  # distinct pieces (words, numbers, runs of spaces) whose ids are kept, beyond the tokens
# Texts on which the piece encoder must equal the whole pipeline, or it is not used.
_PIECE_PROBES = (
    "It's the cat's toy; they're here, we've gone, I'm sure, you'll see, he'd say. IT'S MINE'LL 'D",
    "Numbers: 1 12 123 1234 12345 3.14 1,000,000 -5 +7 1e10 0x1F 2024-07-26 10:30pm 4/5 50%",
    "Spaces:  two   three    four\ttab\t\ttabs \n newline\n\nparagraph   \n  trailing   ",
    "Punctuation!!! ??? ... --- (brackets) [x] {y} <z> \"quoted\" 'single' `code` #tag @user $5 ^&*_=+|\\/~",
    "def f(x):\n    return x ** 2  # square\n\n\tif a<b and c>=d: pass\r\nWindows line\r\n",
    "Café, naïve, façade, Ærøskøbing, São Paulo, £10, 5°C, ½ cup, ‘quotes’ “double” — dash – en… • ¡Hola! ¿Qué?",
    "ALLCAPS lowercase MixedCase camelCaseWord snake_case_word kebab-case-word ÉCOLE straße ÿ",
)


class _PieceEncoder:
    """A byte-level BPE pipeline (GPT-2's, SmolLM's, Llama-3's, Qwen's) splits text with a
    regular expression, maps each piece's bytes to characters and runs the BPE model on each
    piece alone, so a text's ids are its pieces' ids joined. Here the split is the pipeline's
    own pattern run by Python's `re`, and each distinct piece goes through the model once and
    is kept: the tokenizers library spent most of its time in its regex engine and in its
    per-call work (4.7 us per token of SummEval text whole; 0.6 us here once the pieces are
    known, 13 us per new piece through its `encode` against 5 us through the model). Text
    with a character outside _PLAIN is encoded whole."""

    def __init__(self, tokenizer, split: re.Pattern) -> None:
        self._model = tokenizer.model
        self._split = split
        self._tokens = self._whole_tokens(tokenizer)
        self._ids = dict(self._tokens)

    @classmethod
    def for_pipeline(cls, tokenizer) -> _PieceEncoder | None:
        """The piece encoder for a tokenizers pipeline, None where its split cannot be run here."""
        normalizer = tokenizer.normalizer and json.loads(tokenizer.normalizer.__getstate__())
        if normalizer not in (None, {"type": "NFC"}):  # NFC leaves _PLAIN as it is
            return None
        model = json.loads(tokenizer.model.__getstate__())
        if model.get("type") != "BPE" or model.get("dropout") is not None or tokenizer.pre_tokenizer is None:
            return None
        pattern = _split_pattern(json.loads(tokenizer.pre_tokenizer.__getstate__()))
        translated = pattern and _for_plain_text(pattern)
        try:
            split = re.compile(translated) if translated else None
        except re.error:
            return None
        if split is None or split.groups:
            return None
        encoder = cls(tokenizer, split)
        whole = [tokenizer.encode(text, add_special_tokens=False).ids for text in _PIECE_PROBES]
        return encoder if [encoder.encode(text) for text in _PIECE_PROBES] == whole else None

    def encode(self, text: str) -> list[int] | None:
        """The text's ids, None where it must be encoded whole."""
        if _NOT_PLAIN.search(text):
            return None
        pieces = self._split.findall(text)
        # Text between matches (the pattern's own gaps) or empty matches: the pipeline's to split.
        if sum(map(len, pieces)) != len(text) or "" in pieces:
            return None
        ids: list[int] = []
        known = self._ids
        for piece in pieces:
            ids += known[piece] if piece in known else self._encode_piece(piece)
        return ids

    def _whole_tokens(self, tokenizer) -> dict[str, tuple[int, ...]]:
        """Every vocabulary token of plain text that the BPE model writes as itself, by its text:
        the pieces known from the start. Most words of a text new to the server are one token
        (two thirds of the distinct pieces of SummEval's articles and summaries), and the model
        took 3.6 us for each new piece; checking the 49,152 tokens of SmolLM2's vocabulary takes
        0.15 s, once."""
        byte_of = {char: byte for byte, char in _BYTE_CHARS.items()}
        tokens = {}
        for characters, token_id in tokenizer.get_vocab(with_added_tokens=False).items():
            try:
                text = bytes(map(byte_of.__getitem__, characters)).decode()
            except (KeyError, UnicodeDecodeError):  # part of a character
                continue
            if not _NOT_PLAIN.search(text) and [t.id for t in self._model.tokenize(characters)] == [token_id]:
                tokens[text] = (token_id,)
        return tokens

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        characters = piece.encode().decode("latin-1").translate(_BYTE_CHARS)  # one per byte
        piece_ids = tuple(token.id for token in self._model.tokenize(characters))
        if len(self._ids) >= len(self._tokens) + _PIECES_KEPT:  # a flood of made-up words cannot grow it without end
            self._ids.clear()
            self._ids.update(self._tokens)
        self._ids[piece] = piece_ids
        return piece_ids


def _byte_chars() -> dict[int, str]:
    """The byte-level pre-tokenizer's character for each byte (GPT-2's table), keyed by the
    byte read as Latin-1: printable Latin-1 bytes stand for themselves, the others for the
    characters from U+0100 on, in order."""
    kept = {*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    others = iter(range(0x100, 0x200))
    return {byte: chr(byte) if byte in kept else chr(next(others)) for byte in range(0x100)}


_BYTE_CHARS = _byte_chars()


def _split_pattern(pre_tokenizer: dict) -> str | None:
    """The regular expression a byte-level pre-tokenizer splits with: GPT-2's, or a Split's
    (matches isolated) before a byte-level step that splits no further; None for any other."""
    kind = pre_tokenizer["type"]
    if kind == "ByteLevel":
        return _GPT2_SPLIT if pre_tokenizer.get("use_regex", True) else None
    if kind != "Sequence" or len(pre_tokenizer["pretokenizers"]) != 2:
        return None
    split, byte_level = pre_tokenizer["pretokenizers"]
    if (split["type"] != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
            or "Regex" not in split.get("pattern", {}) or byte_level["type"] != "ByteLevel"
            or byte_level.get("use_regex", True)):
        return None
    return split["pattern"]["Regex"]


def _for_plain_text(pattern: str) -> str | None:
    """A split pattern (Oniguruma's syntax, as the tokenizers library runs it) in Python's `re`
    for text of _PLAIN characters: `\\p{L}` and `\\p{N}` spelled out as _PLAIN's letters and
    numbers. None where the pattern uses anything whose meaning could differ (other classes
    or properties, POSIX brackets, word boundaries, anchors, flags)."""
    out: list[str] = []
    in_class, i = False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escape = pattern[i:i + 2]
            if pattern.startswith(("\\p{L}", "\\p{N}"), i):
                chars = _LETTERS if pattern[i + 3] == "L" else _NUMBERS
                out.append(chars if in_class else f"[{chars}]")
                i += 5
                continue
            if escape[1:] in ("s", "S", "r", "n", "t") or (escape[1:] and not escape[1:].isalnum()):
                out.append(escape)
                i += 2
                continue
            return None
        if char == "[":
            if in_class or pattern.startswith(("[:", "[^:"), i):
                return None  # nested or POSIX classes, intersections: Oniguruma's own
            in_class = True
            out.append(pattern[i:i + 2] if pattern.startswith(("[]", "[^"), i) else char)
            i += 2 if pattern.startswith(("[]", "[^"), i) else 1
            continue
        if char == "]" and in_class:
            in_class = False
        elif char == "&" and in_class and pattern.startswith("&&", i):
            return None
        elif not in_class and (char in "^$" or (pattern.startswith("(?", i) and not pattern.startswith(_GROUPS, i))):
            return None  # Oniguruma's ^ and $ match at every line; its (?m) is Python's (?s)
        out.append(char)
        i += 1
    return "".join(out)


def _component(module, spec: dict | None):
    """A normalizer or pre-tokenizer from its serialized form, as tokenizers unpickles one."""
    if spec is None:
        return None
    component = module.Sequence([])
    component.__setstate__(json.dumps(spec).encode())
    return component


def _without_prepend(normalizer: dict | None) -> dict | None:
    """The normalizer less SentencePiece's legacy `Prepend("▁")`."""
    if normalizer is None or normalizer["type"] == "Prepend":
        return None
    if normalizer["type"] == "Sequence":
        kept = [n for n in map(_without_prepend, normalizer["normalizers"]) if n is not None]
        return {**normalizer, "normalizers": kept}
    return normalizer


def _without_prefix_space(pre_tokenizer: dict | None) -> dict | None:
    """The pre-tokenizer with Metaspace's and ByteLevel's leading space turned off."""
    if pre_tokenizer is None:
        return None
    kind = pre_tokenizer["type"]
    if kind == "Metaspace":
        return {**pre_tokenizer, "prepend_scheme": "never"}
    if kind == "ByteLevel":
        return {**pre_tokenizer, "add_prefix_space": False}
    if kind == "Sequence":
        return {**pre_tokenizer, "pretokenizers": [_without_prefix_space(p) for p in pre_tokenizer["pretokenizers"]]}
    return pre_tokenizer


class _MistralCommonText:
    """mistral-common's tekken encoder: it never parses control tokens and adds no space."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer

    def start(self, text: str) -> list[int]:
        return self.continuation(text)

    def continuation(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False)


def _is_mistral_common(tokenizer) -> bool:
    return type(tokenizer).__name__ == "MistralCommonBackend"


def _text_encoder(tokenizer) -> _TextEncoder:
    if _is_mistral_common(tokenizer):
        return _MistralCommonText(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise JudgeTokenizerError(
            f"judge tokenizer {type(tokenizer).__name__} is not supported: the server needs a tokenizer backed by "
            "the `tokenizers` library (tokenizer.json) or mistral-common (tekken.json)"
        )
    return _TokenizersText(backend)


def _control_tokens(tokenizer) -> dict[str, int]:
    """Every control or role token: each added token, flagged special or not, and each special token
    (mistral-common's tekken keeps all its control tokens among the special ones)."""
    added = {} if _is_mistral_common(tokenizer) else tokenizer.added_tokens_decoder
    controls = {str(token): token_id for token_id, token in added.items()}
    for token_id in tokenizer.all_special_ids:
        controls.setdefault(tokenizer.convert_ids_to_tokens(token_id), token_id)
    return {text: token_id for text, token_id in controls.items() if text}


def _leading_special_ids(tokenizer) -> list[int]:
    """What the tokenizer puts in front of a text of its own accord (BOS, for most families)."""
    plain = tokenizer.encode("Hello", add_special_tokens=False)
    full = tokenizer.encode("Hello", add_special_tokens=True)
    at = next((i for i in range(len(full)) if full[i:i + len(plain)] == plain), 0)
    return list(full[:at])


def _pinned_strftime(format: str) -> str:
    return PINNED_DATE.strftime(format)


def _render_user_turn(tokenizer, thinking: bool) -> tuple[str, str] | None:
    """The chat markup before and after one user message, with the assistant turn opened
    and the template's thinking switch (`enable_thinking`) set; None for a tokenizer
    without a chat format."""
    if tokenizer.chat_template is None and not _is_mistral_common(tokenizer):
        return None
    rendered = _render_chat(tokenizer, _USER_SLOT, thinking)
    if _render_chat(tokenizer, _USER_SLOT, thinking) != rendered:
        raise JudgeTokenizerError("the judge's chat template renders differently each time; it cannot be pinned")
    if rendered.count(_USER_SLOT) != 1:
        raise JudgeTokenizerError("the judge's chat template does not write the user message verbatim, exactly once")
    turn_open, turn_close = rendered.split(_USER_SLOT)
    return turn_open, turn_close


def _render_chat(tokenizer, content: str, thinking: bool) -> str:
    messages = [{"role": "user", "content": content}]
    if _is_mistral_common(tokenizer):
        # mistral-common encodes the request itself; its ids are read back as text (markup
        # included), which the start-up check re-encodes and compares with them.
        return tokenizer.decode(_mistral_chat_ids(tokenizer, messages), clean_up_tokenization_spaces=False)
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, strftime_now=_pinned_strftime, enable_thinking=thinking
    )


def _mistral_chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False))


class Tokenization:
    """The judge tokenizer, split into trusted template text and untrusted user text."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._text = _text_encoder(tokenizer)
        self.control_tokens = _control_tokens(tokenizer)  # text -> id of every control or role token
        self.control_ids = frozenset(self.control_tokens.values())
        by_length = sorted(self.control_tokens, key=len, reverse=True)
        self._markup = re.compile("|".join(map(re.escape, by_length))) if by_length else None
        # The score is read straight after the form with the thinking switch off (Qwen3's
        # template then writes an empty think block, as its model answers without thinking).
        turn = _render_user_turn(tokenizer, thinking=False)
        self.chat = turn is not None
        self.turn_open, self.turn_close = turn if turn is not None else ("", "\n\n")
        # Reasoning mode opens the judge's turn with the switch on, where the switch changes
        # only that turn (Qwen3, QwQ, DeepSeek-R1); a template that turns thinking on earlier
        # in the prompt (Gemma 4, in a system turn) keeps its plain turn, and the judge writes
        # its evaluation as its answer.
        thinking = _render_user_turn(tokenizer, thinking=True)
        same_opening = thinking is not None and thinking[0] == self.turn_open
        self.reasoning_turn_close = thinking[1] if same_opening else self.turn_close
        # A chat template writes its own BOS; a plain prompt gets the one the tokenizer adds.
        self.bos = [] if self.chat else _leading_special_ids(tokenizer)
        self._encode_user = functools.lru_cache(maxsize=8192)(self._encode_user_uncached)
        self._check()

    @property
    def tokenizer(self):
        return self._tokenizer

    def begin(self, text: str) -> list[int]:
        """The start of a prompt: BOS where the model expects one, then our text."""
        return self.bos + self._trusted(text, at_start=True)

    def template(self, text: str) -> list[int]:
        """Text of our own (template, rubric, form) that follows other tokens: control tokens
        written in it are honoured."""
        return self._trusted(text, at_start=False)

    def user(self, text: str) -> list[int]:
        """Untrusted text: control-token markers stay literal characters. Cached, since
        a GRPO group repeats the same prompt across its completions."""
        return list(self._encode_user(text))

    def user_ids(self, text: str) -> tuple[int, ...]:
        """user(text) as the cache holds it, for callers that only read it (no copy)."""
        return self._encode_user(text)

    def _encode_user_uncached(self, text: str) -> tuple[int, ...]:
        return tuple(self._text.continuation(text))

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, clean_up_tokenization_spaces=False)

    def _trusted(self, text: str, at_start: bool) -> list[int]:
        ids: list[int] = []
        position = 0
        for match in self._markup.finditer(text) if self._markup else ():
            if match.start() > position:
                ids += self._plain(text[position:match.start()], at_start and position == 0)
            ids.append(self.control_tokens[match.group()])
            position = match.end()
        if position < len(text):
            ids += self._plain(text[position:], at_start and position == 0)
        return ids

    def _plain(self, text: str, at_start: bool) -> list[int]:
        return self._text.start(text) if at_start else self._text.continuation(text)

    def _check(self) -> None:
        """Refuses a tokenizer that would break the prompt's guarantees, naming what broke."""
        name = type(self._tokenizer).__name__
        for text, token_id in self.control_tokens.items():
            if self.template(text) != [token_id]:
                raise JudgeTokenizerError(f"judge tokenizer {name}: control token {text!r} does not encode as its id")
            if self.control_ids.intersection(self.user(f"{text} x{text}")):
                raise JudgeTokenizerError(
                    f"judge tokenizer {name}: user text {text!r} still encodes as a control token"
                )
        if _is_mistral_common(self._tokenizer):
            message = "Rate this: 5 [INST] <s>"
            ours = self.begin(self.turn_open) + self.user(message) + self.template(self.turn_close)
            if ours != _mistral_chat_ids(self._tokenizer, [{"role": "user", "content": message}]):
                raise JudgeTokenizerError(
                    f"judge tokenizer {name}: the chat markup does not re-encode as mistral-common encodes a request"
                )
        for pieces in _JOIN_PROBES:
            ids = self.template(pieces[0]) + [t for piece in pieces[1:] for t in self.user(piece)]
            if self.decode(ids) != "".join(pieces):
                raise JudgeTokenizerError(
                    f"judge tokenizer {name}: pieces {pieces!r} encoded one after another decode as "
                    f"{self.decode(ids)!r}, not as the text written"
                )
