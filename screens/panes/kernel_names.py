"""Kernel names short enough to read in a table: demangled, namespaces dropped, template
arguments collapsed to the one that says what the kernel computes (plain Python, no Textual).

    void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float,
        float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, ...)
                                          -> vectorized_elementwise_kernel<MulFunctor>
    void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float,
        at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)
                                          -> cunn_SoftMaxForward
    _Z17gelu_naive_kernelIfEvPKT_PS0_i    -> gelu_naive_kernel

The rules: a template argument that is a number, a builtin type or from `std::` says nothing; a
wrapper (`BinaryFunctor<..., MulFunctor<float>>`, a lambda inside `GeluCUDAKernelImpl(...)`)
stands for what it wraps, innermost first; an argument that repeats the kernel's own name
(`SoftMaxForwardEpilogue` of `cunn_SoftMaxForward`) is dropped. Names the parser does not
understand are shown as they are. `fit_name(name, width)` then cuts it to a column's width, the template argument kept.
Mangled names are demangled by the core's one demangler (workbench/demangle.py: in-process with the
`cxxfilt` package, else cu++filt / c++filt).
"""

from __future__ import annotations

import re
from typing import Iterable

from workbench.demangle import demangle_all as core_demangle_all

BUILTIN_WORDS = {"void", "bool", "char", "short", "int", "long", "float", "double", "unsigned",
                 "signed", "const", "true", "false", "half", "__half", "__nv_bfloat16", "size_t"}
NUMBER_RE = re.compile(r"^-?\d+[uUlL]*$")
OVERLAP_LETTERS = 8  # an argument sharing this many letters in a row with the kernel's name repeats it
ELLIPSIS = "…"


def short(name: str) -> str:
    """The display form of one kernel name (see the module docstring); never raises."""
    text = demangle(name).strip()
    if "<" not in text and "::" not in text and not text.startswith("void "):
        return text
    try:
        node = _Parser(text).name()
    except (IndexError, ValueError):
        return text
    if node is None:
        return text
    base, args = node
    keys = [k for k in (_key(a) for a in args) if k and not _repeats(k, base)]
    return f"{base}<{', '.join(dict.fromkeys(keys))}>" if keys else base


def fit(text: str, width: int) -> str:
    """`text` cut to `width` cells, the cut marked with `…`."""
    if width <= 0 or len(text) <= width:
        return text
    return text[:max(width - 1, 0)] + ELLIPSIS


def fit_name(text: str, width: int) -> str:
    """A short kernel name cut to `width`, keeping its `<argument>` (what it computes) whole
    where it can: `vectorized_elementwise_kernel<MulFunctor>` -> `vectorized_…<MulFunctor>`."""
    if len(text) <= width or not text.endswith(">") or "<" not in text:
        return fit(text, width)
    base, _, args = text.partition("<")
    room = width - len(args) - 1
    if room < 4:  # the argument alone is wider: keep as much of it as fits, it says more
        return ELLIPSIS + "<" + fit(args[:-1], width - 3) + ">"
    return fit(base, room) + "<" + args


def demangle(name: str) -> str:
    """An Itanium-mangled name (`_Z...`) demangled; anything else unchanged."""
    return demangle_all([name])[0]


def demangle_all(names: Iterable[str]) -> list[str]:
    """Demangle many names at once (workbench.demangle); names stay as given where nothing reads them."""
    names = list(names)
    found = core_demangle_all(names)
    return [found[n] for n in names]


def _key(arg: "_Node | str | None") -> str | None:
    """What a template argument stands for: its innermost telling name, or None."""
    if arg is None or isinstance(arg, str):
        return None
    base, args = arg
    inner = [k for k in (_key(a) for a in args) if k]
    return inner[-1] if inner else base


def _repeats(key: str, base: str) -> bool:
    """`key` shares a run of OVERLAP_LETTERS letters with `base` (case-insensitive)."""
    a, b = re.sub(r"[^a-z]", "", key.lower()), re.sub(r"[^a-z]", "", base.lower())
    return any(a[i:i + OVERLAP_LETTERS] in b for i in range(len(a) - OVERLAP_LETTERS + 1))


_Node = tuple  # (base name, [template arguments as nodes, or None for the ones that say nothing])


class _Parser:
    """A small recursive-descent reader of demangled C++ names: components joined by `::`, each
    an identifier with optional `<template args>`, `(params)` and `const`; lambdas, `operator()`
    and `(anonymous namespace)` are components that name nothing."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def name(self) -> _Node | None:
        """The whole name: an optional return type word, then the qualified name."""
        self._skip_spaces()
        if self.text.startswith("void ", self.pos):
            self.pos += 5
        return self._qualified(stop=")>,")

    def _qualified(self, stop: str) -> _Node | None:
        last: _Node | None = None
        words: list[str] = []
        while self.pos < len(self.text) and self.text[self.pos] not in stop:
            component = self._component(stop)
            if isinstance(component, tuple):
                last = component
            elif isinstance(component, str):
                words.append(component)
            if self.text.startswith("::", self.pos):
                self.pos += 2
            elif self.pos < len(self.text) and self.text[self.pos] == " ":
                self._skip_spaces()  # `unsigned int`, `float const*`
            elif self.pos < len(self.text) and self.text[self.pos] not in stop + "({":
                self.pos += 1  # `*`, `&`: part of a type, names nothing
        if last is None or last[0] in BUILTIN_WORDS:
            return None
        return last

    def _component(self, stop: str) -> "_Node | str | None":
        text = self.text
        if text.startswith("(anonymous namespace)", self.pos):
            self.pos += len("(anonymous namespace)")
            return None
        if text.startswith("{lambda", self.pos):
            self._skip_balanced("{", "}")
            return None
        if text[self.pos] == "(":  # a parameter list after operator() or a function
            self._skip_balanced("(", ")")
            return None
        match = re.compile(r"[A-Za-z_~][A-Za-z0-9_]*").match(text, self.pos)
        if match is None:
            if text[self.pos] not in stop:
                self.pos += 1
            return None
        word = match.group(0)
        self.pos = match.end()
        if word == "operator":
            if text.startswith("()", self.pos):
                self.pos += 2
            return None
        if word == "std":  # std::array<char*, 3ul>: plumbing, never what the kernel computes
            self._skip_to_end_of_argument()
            return None
        args = self._template_args() if text.startswith("<", self.pos) else []
        if text.startswith("(", self.pos):
            self._skip_balanced("(", ")")
        if text.startswith(" const", self.pos):
            self.pos += len(" const")
        if word in BUILTIN_WORDS or NUMBER_RE.match(word):
            return word
        return (word, args)

    def _template_args(self) -> list:
        self.pos += 1  # '<'
        args = []
        while self.pos < len(self.text) and self.text[self.pos] != ">":
            self._skip_spaces()
            start = self.pos
            if NUMBER_RE.match(self._until_comma()):
                self.pos = start + len(self._until_comma())
                args.append(None)
            else:
                self.pos = start
                args.append(self._qualified(stop=",>"))
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
            self._skip_spaces()
        self.pos += 1  # '>'
        return args

    def _until_comma(self) -> str:
        match = re.compile(r"[^,<>()]*").match(self.text, self.pos)
        return match.group(0).strip()

    def _skip_to_end_of_argument(self) -> None:
        depth = 0
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in "<({":
                depth += 1
            elif char in ">)}":
                if depth == 0:
                    return
                depth -= 1
            elif char == "," and depth == 0:
                return
            self.pos += 1

    def _skip_balanced(self, open_char: str, close_char: str) -> None:
        depth = 0
        while True:
            char = self.text[self.pos]  # IndexError on an unbalanced name: shown as it is
            depth += char == open_char
            depth -= char == close_char
            self.pos += 1
            if depth == 0:
                return

    def _skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1
