"""The fifth held-out set: written blind after held_out4, on new pages."""

from __future__ import annotations

import pytest

from bench.conversation_set import HELD_OUT5
from tests.bench.blind_set_checks import CHECKS, Check


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_set_holds_what_a_blind_held_out_set_must(check: Check) -> None:
    check(name="held_out5", convs=HELD_OUT5)
