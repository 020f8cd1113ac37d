"""workbench/fmt.clip: errors in progress lines and table notes are cut at a word, with an
ellipsis ("(run with --force to )" read as another message)."""

from workbench.fmt import clip


def test_short_text_is_whole_and_long_text_ends_at_a_word_with_an_ellipsis():
    text = "far beyond timeout_s 120 s (run with --force to try)"
    assert clip(text, len(text)) == text
    cut = clip(text, 40)
    assert cut == "far beyond timeout_s 120 s (run with…" and len(cut) <= 40
    assert clip("x" * 50, 10) == "x" * 9 + "…"  # no space to cut at: cut at the limit
