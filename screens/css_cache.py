"""Textual's stylesheet made cheaper for the TUI (issue #39): parsed CSS kept between starts, and
the rules a node matched kept between restyles.

**Between starts.** Every start, Textual tokenizes and parses the app's `app.tcss` and each widget
class's DEFAULT_CSS (about 37,000 characters, 50 sources) as the first widgets of each class mount:
~80 ms of the first frame's ~0.3 s after the imports on the 2-core CPU box. `CachedStylesheet`
is Textual's `Stylesheet` whose `_parse_rules` (Textual's own in-memory parse cache) first
looks in a `ParseStore`, a file of the parsed rule sets that the last start wrote.

The file is a pickle, so it is read only where no one else could have written it: a folder of
this user's that others may not enter, a regular file of this user's that others may not read
or write, opened without following a symlink (`_read_private`); anything else, or a file that
does not load, is ignored and the CSS parsed as without it. An entry's key is the digest of
everything its rules depend on: the CSS text, where it was read from, Textual's default-CSS
flag, tie breaker and scope, the CSS variables (the theme: Textual substitutes them while
parsing) and which Textual parsed it (`textual_build`); the file's name carries Python's
version. `save()` writes the store when this process parsed something it did not hold; only
lists of RuleSets without errors are kept or loaded (Textual raises on those), and a store whose
rules fail when Textual parses with them is dropped and the CSS parsed afresh.

**Between restyles.** Textual matches every rule that could apply to a node against the node's
path each time the node is restyled (a class or pseudo-class change, focus, hover): ~1.2 ms a
node on the 2-core box, and a pane key restyles two tabs before its frame and the two tables
(each with its nine component classes) after it. Textual keeps what a node matched only within
one restyle pass (`Stylesheet.update_nodes`' cache, keyed on the parent, which cannot change
within the pass). `MemoStylesheet` keeps it across passes, keyed on all that the match depends
on: for each node of the path from the App, its class (type selectors match its bases), id and
classes, and the value of each pseudo-class the node's candidate rules name (Textual's
`has_pseudo_class`, as its selectors check them). Nodes whose candidate rules name a
pseudo-class that depends on siblings or descendants (Textual's own
`_EXCLUDE_PSEUDO_CLASSES_FROM_CACHE`: first-child, odd, focus-within, ...) are matched every
time. The memo is emptied when the rules change (a parse, a theme's reparse: a new `rules_map`).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

import textual
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.widget import Widget

READ_LIMIT = 16 << 20  # bytes: a larger file is not this cache's (~120 KB for the app's CSS)


def store_path(folder: Path) -> Path:
    """The store's file in `folder`, one per Python version."""
    return folder / f"tcss-py{sys.version_info[0]}.{sys.version_info[1]}.pickle"


def textual_build() -> str:
    """Which Textual parsed the rules: its folder, and the size and modification time of the
    modules that define them (a reinstall or upgrade rewrites them). Part of every key, so rules
    of another Textual are never used (importlib.metadata's version lookup costs ~45 ms)."""
    folder = Path(textual.__file__).parent
    parts = [str(folder)]
    for name in ("css/model.py", "css/styles.py", "css/parse.py", "css/tokenize.py"):
        try:
            st = os.stat(folder / name)
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{name}:missing")
    return "|".join(parts)


MAX_ENTRIES = 400  # the app uses ~55; beyond this a save keeps only this start's entries


class ParseStore:
    """Parsed rule sets by key (see the module docstring), loaded from and saved to `folder`
    (created 0700 on save). A folder or file that is not this user's alone, one that does not
    load, or one holding anything but lists of Textual RuleSets without errors gives an empty
    store; `problem` says why (None when none)."""

    def __init__(self, folder: Path):
        self.folder, self.path = folder, store_path(folder)
        self.loaded: dict[str, list] = {}
        self.parsed: dict[str, list] = {}  # parsed by this process, not in the store yet
        self.used: set[str] = set()  # keys this process took from the store or parsed
        self.problem: str | None = None
        self._load()

    def _load(self) -> None:
        try:
            data = _read_private(self.folder, self.path)
            if data is None:
                return
            entries = pickle.loads(data)
        except Exception as exc:  # planted, foreign, truncated or of another version: parse instead
            self.problem = f"{self.path}: not used ({exc})"
            return
        if isinstance(entries, dict) and all(isinstance(k, str) and _valid_rules(v) for k, v in entries.items()):
            self.loaded = entries
        else:
            self.problem = f"{self.path}: not used (not a store of parsed rules)"

    def get(self, key: str) -> list | None:
        rules = self.loaded.get(key)
        if rules is not None:
            self.used.add(key)
        return rules

    def put(self, key: str, rules: list) -> None:
        if _valid_rules(rules):
            self.parsed[key] = rules
            self.used.add(key)

    def discard(self, why: str) -> None:
        """Forget what was loaded (its rules failed where Textual used them) and write no
        store from it: the next save holds only what this process parsed."""
        self.problem = f"{self.path}: not used ({why})"
        self.loaded, self.used = {}, set(self.parsed)

    @property
    def changed(self) -> bool:
        """Whether this process parsed rules the store does not hold."""
        return bool(self.parsed)

    def save(self) -> bool:
        """Write the store when this process parsed rules it did not hold: what it held and
        what was parsed (only this start's entries where that passes MAX_ENTRIES); whether it
        wrote. A folder that is not this user's alone, or a write that fails, writes nothing
        (the next start parses again; `problem` says why)."""
        if not self.changed:
            return False
        entries = {**self.loaded, **self.parsed}
        if len(entries) > MAX_ENTRIES:
            entries = {key: entries[key] for key in self.used if key in entries}
        try:
            from workbench.engine.daemon.paths import private_folder, write_private

            private_folder(self.folder)
            write_private(self.path, pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as exc:
            self.problem = f"{self.path}: not written ({exc})"
            return False
        self.loaded, self.parsed = entries, {}
        return True


def _valid_rules(rules: object) -> bool:
    """A list of Textual RuleSets without errors (Textual raises on those)."""
    return isinstance(rules, list) and all(isinstance(rule, RuleSet) and not rule.errors for rule in rules)


def _read_private(folder: Path, path: Path) -> bytes | None:
    """The bytes of `path`, None when it is missing; raises OSError unless `folder` is a folder
    of this user's that others may not enter and `path` a regular file of this user's that
    others may not read or write, opened without following a symlink. (The checks of
    workbench.engine.daemon.paths.read_private, whose module's imports cost ~40 ms of the
    first frame; `save` uses that module, after the first frame.)"""
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{folder} is not a private folder of uid {os.getuid()}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise OSError(f"{path} is not a private file of uid {os.getuid()}")
        if st.st_size > READ_LIMIT:
            raise OSError(f"{path}: {st.st_size} bytes, more than {READ_LIMIT}")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


MEMO_MAX = 4096  # matched rule maps kept; the app restyles ~300 distinct node states


def _path_key(path: list, named: tuple[str, ...]) -> tuple:
    """What the selectors check of each node of `path` (App first; model.Selector.check): its
    class (the type names are its class's and its bases'), id, classes, and the value of each
    pseudo-class in `named`. A Widget's `disabled` / `enabled` are Widget.is_disabled (its own
    flag or an ancestor Widget's), carried down the path rather than walked up from each node."""
    key = []
    disabled = False
    for node in path:
        if node._PSEUDO_CLASSES is Widget._PSEUDO_CLASSES:
            disabled = disabled or node.disabled
            values = tuple(disabled if name == "disabled" else (not disabled) if name == "enabled"
                           else node.has_pseudo_class(name) for name in named)
        else:
            values = tuple(node.has_pseudo_class(name) for name in named)
        key.append((type(node), node._id, frozenset(node._classes), values))
    return tuple(key)


def _replace_changed(node: Any, rules: Any) -> None:
    """Textual's `Stylesheet.replace_rules` without animation, setting only the rules whose value
    changes (setting an equal value is a no-op there: `Styles.set_rule` returns False)."""
    base = node.styles.base
    current = base._rules
    for name in current.keys() | rules.keys():
        value = rules.get(name)
        if current.get(name) != value:
            setattr(base, name, value)


class MemoStylesheet(Stylesheet):
    """Textual's Stylesheet that keeps the rules a node matched across restyles (module
    docstring, "Between restyles"); a node restyled in the same state as a node before it gets
    the same rules without matching them again."""

    def __init__(self, *, variables: dict[str, str] | None = None):
        super().__init__(variables=variables)
        self._matched: dict[tuple, Any] = {}  # path key -> the RulesMap Textual computed
        self._named: dict[frozenset, tuple[str, ...]] = {}  # a node's selector names -> the pseudo-classes its candidate rules name
        self._matched_for: Any = None  # the rules_map both were built from (held, so never another's id)

    def _pseudo_classes_named(self, rules_map: Any, names: frozenset) -> tuple[str, ...]:
        named = self._named.get(names)
        if named is None:
            candidates = {rule for name in rules_map.keys() & names for rule in rules_map[name]}
            named = tuple(sorted(set().union(*(rule.pseudo_classes for rule in candidates))))
            self._named[names] = named
        return named

    def apply(self, node: Any, *, animate: bool = False, cache: dict | None = None) -> None:
        rules_map = self.rules_map
        if rules_map is not self._matched_for:
            self._matched.clear()
            self._named.clear()
            self._matched_for = rules_map
        named = self._pseudo_classes_named(rules_map, frozenset(node._selector_names))
        if not self._EXCLUDE_PSEUDO_CLASSES_FROM_CACHE.isdisjoint(named):
            super().apply(node, animate=animate, cache=cache)
            return
        key = _path_key(node.css_path_nodes, named)
        rules = self._matched.get(key)
        if rules is None:
            computed: dict[tuple, Any] = {}  # Textual's pass cache: it stores this node's rules there
            super().apply(node, animate=animate, cache=computed)
            if len(computed) == 1:
                if len(self._matched) >= MEMO_MAX:
                    self._matched.clear()
                self._matched[key] = next(iter(computed.values()))
            return
        # what Textual's apply sets before matching (none of the excluded pseudo-classes is named here)
        node._has_hover_style = "hover" in named
        node._has_focus_within = node._has_order_style = node._has_odd_or_even = False
        if animate and "transitions" in rules:
            self.replace_rules(node, rules, animate=True)
        else:  # no transition declared: Textual's animated replace sets each changed rule as this does
            _replace_changed(node, rules)
            node.notify_style_update()  # as replace_rules ends
        self._process_component_classes(node)


class CachedStylesheet(MemoStylesheet):
    """Textual's Stylesheet whose parses go through a ParseStore (module docstring), and that
    keeps matched rules as MemoStylesheet. Textual's own copies of it (`copy`, `reparse` on a
    theme change) are plain Stylesheets: they parse."""

    def __init__(self, *, variables: dict[str, str] | None = None, store: ParseStore):
        super().__init__(variables=variables)
        self.store = store
        self._variables_digest: str | None = None

    def set_variables(self, variables: dict[str, str]) -> None:
        super().set_variables(variables)
        self._variables_digest = None

    def _key(self, css: str, read_from: Any, is_default_rules: bool, tie_breaker: int, scope: str) -> str:
        if self._variables_digest is None:
            self._variables_digest = hashlib.sha256(repr((textual_build(), sorted(self._variables.items())))
                                                    .encode()).hexdigest()
        text = repr((self._variables_digest, read_from, is_default_rules, tie_breaker, scope, css))
        return hashlib.sha256(text.encode()).hexdigest()

    def parse(self) -> None:
        """Textual's parse; where it fails with rules from the store in it, the store is
        dropped and the CSS parsed afresh (a store that loads but whose rules do not work must
        not stop the app, start after start)."""
        try:
            super().parse()
        except Exception as exc:
            if not self.store.loaded:
                raise
            self.store.discard(f"its rules failed: {type(exc).__name__}: {exc}")
            self._parse_cache.clear()
            self._invalid_css = set()
            super().parse()

    def _parse_rules(self, css: str, read_from: Any, is_default_rules: bool = False, tie_breaker: int = 0,
                     scope: str = "") -> list:
        memo = (css, read_from, is_default_rules, tie_breaker, scope)  # Textual's in-memory cache key
        if memo in self._parse_cache:
            return self._parse_cache[memo]
        key = self._key(css, read_from, is_default_rules, tie_breaker, scope)
        rules = self.store.get(key)
        if rules is None:
            rules = super()._parse_rules(css, read_from, is_default_rules, tie_breaker, scope)
            self.store.put(key, rules)
        self._parse_cache[memo] = rules
        return rules
