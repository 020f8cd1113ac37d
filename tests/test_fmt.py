"""workbench/fmt.clip: errors in progress lines and table notes are cut at a word, with an
ellipsis ("(run with --force to )" read as another message)."""

from workbench.fmt import clip


def test_short_text_is_whole_and_long_text_ends_at_a_word_with_an_ellipsis():
    text = "far beyond timeout_s 120 s (run with --force to try)"
    assert clip(text, len(text)) == text
    cut = clip(text, 40)
    assert cut == "far beyond timeout_s 120 s (run with…" and len(cut) <= 40
    assert clip("x" * 50, 10) == "x" * 9 + "…"  # no space to cut at: cut at the limit


def test_grouped_separates_thousands_from_one_thousand_up():
    """The Profile pane's CPU µs column read '13,800' above '2317' (fmt.number groups from 10**4)."""
    from workbench.fmt import grouped

    cases = {2317.4: "2,317", 13812.7: "13,813", 999.96: "1,000", 9999.6: "10,000", 999.4: "999.4",
             -2317.0: "-2,317", 12.345: "12.35", None: "-", float("nan"): "nan", True: "-"}
    assert {value: grouped(value) for value in cases} == cases
