"""The hand-written rewrites cover the parts they are for, each in full words."""

from __future__ import annotations

from bench.conversation import LATER_PARTS
from bench.conversation_rewrites import load_rewrites
from bench.conversation_set import CONVERSATIONS


def test_every_tuning_and_spent_follow_up_has_a_rewrite_and_no_other_does() -> None:
    rewrites = load_rewrites()
    covered = [c for c in CONVERSATIONS if not c.held_out]
    for part in ("tuned2", "tuned3", "tuned4", "tuned5", "held_out5", "held_out6"):
        covered += LATER_PARTS[part]
    keys = {(c.first, c.follow_up) for c in covered}
    assert keys <= set(rewrites)
    # Nothing for a set that can still judge a change, nor for the topic switches.
    for part in ("held_out7", "switch4"):
        assert not {(c.first, c.follow_up) for c in LATER_PARTS[part]} & set(rewrites)
    assert set(rewrites) == keys


def test_each_rewrite_is_written_out_not_copied() -> None:
    for (first, follow_up), rewrite in load_rewrites().items():
        assert rewrite.strip(), (first, follow_up)
        assert rewrite.casefold() != follow_up.casefold(), (first, follow_up)
