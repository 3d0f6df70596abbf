"""Reasons shortened for the plain lines, `status` and the report stay whole sentences: dropped
sentences or clauses, never a word cut, and a pointer to where the rest is."""
from orchestrator import ledger
from orchestrator.sentences import fit, quote, sentences

DEMO = ("100% of recent function agent turns (12 of 12) were refused for their format, with 0 "
        "demonstration(s) shown; e.g. 'hello'. No remedy within the knobs' limits (or its knobs "
        "are still being measured).")


def test_whole_sentences_are_kept_and_the_rest_is_pointed_to():
    short = fit(DEMO, 130, more="(the rest: agents/s002/transcript.md)")
    assert short == ("100% of recent function agent turns (12 of 12) were refused for their format, "
                     "with 0 demonstration(s) shown; e.g. 'hello'. (the rest: agents/s002/transcript.md)")
    assert fit(DEMO, 1000) == DEMO                       # what fits is left alone


def test_a_first_sentence_too_long_loses_clauses_not_words():
    out = fit(DEMO, 90)
    assert out == "100% of recent function agent turns (12 of 12) were refused for their format."
    assert len(out) <= 90
    # no clause boundary short enough: whole words and a mark that something was cut
    assert fit("supercalifragilistic expialidocious words without any clause at all", 30) == \
        "supercalifragilistic..."


def test_every_shortening_of_a_demo_reason_ends_on_a_whole_word():
    words = set(DEMO.replace("(", " ").replace(")", " ").split())
    for limit in range(20, len(DEMO), 7):
        out = fit(DEMO, limit)
        last = out.rstrip(".").rstrip("...").split()[-1].strip("(),;:'")
        assert any(w.strip("(),;:.'") == last for w in words), (limit, out)


def test_e_g_does_not_end_a_sentence_and_quotes_are_cut_at_words():
    assert sentences("One, e.g. two. Three.") == ["One, e.g. two.", "Three."]
    # a quoted turn's own sentences stay inside its quote (the CPU demo's s002 line once ended
    # '... e.g. "You're ready to proceed. (the rest: ...)')
    said = 'Refused; e.g. "You\'re ready to proceed. Go on." and "Hi.". No remedy.'
    assert sentences(said) == ['Refused; e.g. "You\'re ready to proceed. Go on." and "Hi.".', "No remedy."]
    assert quote("[action] What do you need from the hotel?", 20) == '"[action] What do..."'


def test_a_session_line_points_to_its_record():
    rec = {"session_id": "s002", "reason": "no remedy for: " + DEMO, "transcript": "x"}
    out = ledger.session_reason(rec, 120)
    assert out.endswith("(the rest: agents/s002/transcript.md)") and " sho" not in out


def test_a_shortened_reason_never_leaves_a_quote_open():
    said = ('100% of recent function agent turns (12 of 12) were refused for their format, with 0 '
            'demonstration(s) shown; e.g. "You\'re ready to proceed. Here, it goes, on and on" and "Hi".')
    for limit in range(30, len(said), 5):
        assert fit(said, limit).count('"') % 2 == 0, (limit, fit(said, limit))

