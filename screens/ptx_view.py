"""The state of the PTX view: highlighted text, where the highlighted instructions are, which
kind `n`/`N` jump between, and the current line (plain Python; highlighting is the core's,
`workbench.ptx.highlight`)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from rich.text import Text


def render_ptx(text: str) -> tuple[Text, dict[str, list[int]]]:
    """(highlighted Text, kind -> 0-based line numbers of the emphasised instructions)."""
    from workbench.ptx import highlight

    return highlight.render(text), {k: sorted(v) for k, v in highlight.positions(text).items() if v}


@dataclass
class PtxView:
    text: str
    highlighted: Text
    positions: dict[str, list[int]] = field(default_factory=dict)
    kind: str | None = None          # None: every highlighted kind
    current: int | None = None       # 0-based line of the current instruction

    @property
    def kinds(self) -> list[str]:
        return sorted(self.positions)

    def lines(self) -> list[int]:
        """The lines `jump` visits under the current filter."""
        if self.kind is not None:
            return self.positions.get(self.kind, [])
        return sorted({line for lines in self.positions.values() for line in lines})

    def jump(self, step: int) -> int | None:
        """Move to the next (step 1) or previous (-1) line of the filter, wrapping around."""
        lines = self.lines()
        if not lines:
            return None
        if self.current is None:
            self.current = lines[0] if step > 0 else lines[-1]
        elif step > 0:
            i = bisect.bisect_right(lines, self.current)
            self.current = lines[i % len(lines)]
        else:
            i = bisect.bisect_left(lines, self.current) - 1
            self.current = lines[i % len(lines)]
        return self.current

    def rendered(self) -> Text:
        """The highlighted text with the current line shown reversed."""
        if self.current is None:
            return self.highlighted
        text = self.highlighted.copy()
        start = sum(len(line) + 1 for line in self.text.split("\n")[: self.current])
        end = start + len(self.text.split("\n")[self.current])
        text.stylize("reverse", start, end)
        return text
