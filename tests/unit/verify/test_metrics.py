"""Answer metrics on known cases: SQuAD normalization, hand-computed F1, numbers, fuzzy, judge parsing."""

from __future__ import annotations

import pytest

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError, ProviderError
from benchflow.model_server import ModelServer, parse_script
from benchflow.verify.metrics import (
    JudgeSettings,
    check_metric,
    contains_answer,
    exact_match,
    extract_numbers,
    f1_score,
    llm_judgement,
    normalize_answer,
    numeric_match,
    parse_score,
    similarity,
)


@pytest.mark.parametrize("raw, normalized", [
    ("The Eiffel Tower", "eiffel tower"),          # article, case
    ("an apple a day", "apple day"),               # articles
    ("Paris!", "paris"),                           # punctuation
    ("  New   York\tCity ", "new york city"),      # whitespace
    ("Theory of the U.S.", "theory of us"),        # "the" only as a word; dots dropped
])
def test_squad_normalization(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


def test_exact_match() -> None:
    assert exact_match("the Paris.", "Paris") == 1.0
    assert exact_match("Paris, France", "Paris") == 0.0
    assert exact_match("Lyon", ["Paris", "lyon"]) == 1.0


def test_f1_partial_overlap_by_hand() -> None:
    # pred tokens: [eiffel, tower, in, paris] gold: [eiffel, tower]
    # common 2, P = 2/4, R = 2/2 -> F1 = 2*0.5*1/(1.5) = 2/3
    assert f1_score("The Eiffel Tower in Paris", "Eiffel Tower") == pytest.approx(2 / 3)
    # pred [barack, obama] gold [president, barack, h, obama]: P=1, R=1/2 -> 2/3
    assert f1_score("Barack Obama", "President Barack H. Obama") == pytest.approx(2 / 3)
    # repeated tokens count per occurrence: pred [x, x, y] gold [x, y, z]
    # common = min(2,1) + 1 = 2, P = 2/3, R = 2/3 -> 2/3
    assert f1_score("x x y", "x y z") == pytest.approx(2 / 3)
    assert f1_score("dog", "cat") == 0.0
    assert f1_score("", "") == 1.0
    assert f1_score("the", "cat") == 0.0  # normalizes to empty
    assert f1_score("Paris", ["London", "Paris"]) == 1.0


def test_contains_answer_on_word_boundaries() -> None:
    assert contains_answer("I believe it is Paris.", "paris") == 1.0
    assert contains_answer("a party", "art") == 0.0
    assert contains_answer("anything", "") == 0.0


def test_numbers() -> None:
    assert extract_numbers("It costs $1,234.50, or -3 and 2e3") == [1234.5, -3.0, 2000.0]
    assert numeric_match("15 * 27 = 405", "405") == 1.0
    assert numeric_match("about 3.14159", "3.1416", rel_tol=1e-4) == 1.0
    assert numeric_match("about 3.14159", "3.1416") == 0.0
    assert numeric_match("no number", "1") == 0.0
    assert numeric_match("1,000", "1000") == 1.0


def test_similarity_uses_rapidfuzz_ratio() -> None:
    assert similarity("Paris", "paris") == 1.0
    # "kitten" vs "sitting": Indel distance 5 over 13 chars -> 8/13
    assert similarity("kitten", "sitting") == pytest.approx(1 - 5 / 13)
    assert similarity("abc", "xyz") == 0.0


@pytest.mark.parametrize("reply, score", [
    ('{"score": 0.8, "reason": "close"}', 0.8),
    ('Sure. ```json\n{"score": 1}\n```', 1.0),
    ("Score: 7/10", 0.7),
    ("score = 85%", 0.85),
    ("I'd rate it 4/5", 0.8),
    ("0.25", 0.25),
    ("8", 0.8),
    ("The answer is incorrect.", 0.0),
    ("Correct.", 1.0),
    ('{"score": 3.0}', 0.3),
])
def test_parse_score(reply: str, score: float) -> None:
    assert parse_score(reply) == pytest.approx(score)


def test_parse_score_none_without_a_score() -> None:
    assert parse_score("I cannot say.") is None


def test_unknown_metric_names_the_nearest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'f1_score'"):
        check_metric("f1score")


@pytest.mark.anyio
async def test_llm_judgement_against_scripted_model() -> None:
    script = parse_script({"answers": [
        {"match": "Answer to grade:\nParis", "text": '{"score": 1.0, "reason": "same"}'},
        {"match": "Answer to grade:\nLyon", "text": "Score: 2/10"},
        {"match": "Answer to grade:\nmumble", "text": "no idea"},
    ]})
    with ModelServer(script) as server:
        settings = JudgeSettings(endpoint=ModelEndpoint.remote(server.url, "judge"),
                                 extra_params={"max_tokens": 64})
        good = await llm_judgement("Paris", "Paris", question="Capital of France?",
                                   settings=settings)
        bad = await llm_judgement("Lyon", "Paris", question="Capital of France?",
                                  settings=settings)
        with pytest.raises(ProviderError, match="no score"):
            await llm_judgement("mumble", "Paris", question="q", settings=settings)
        custom = JudgeSettings(endpoint=settings.endpoint,
                               prompt="Answer to grade:\nLyon ({answer} vs {ground_truth})")
        again = await llm_judgement("x", "y", question="q", settings=custom)
        bodies = [r for r in server.requests]
    assert (good.score, bad.score, again.score) == (1.0, pytest.approx(0.2), pytest.approx(0.2))
    assert good.reply.startswith('{"score"')
    assert len(bodies) == 4
