"""The person's offline choice survives the engine holding its libraries offline."""

from __future__ import annotations

from engine.service.offline import downloads_refused, engine_environment


def test_the_engine_holds_libraries_offline_and_keeps_the_persons_choice() -> None:
    said_nothing = engine_environment({"PATH": "/bin"})
    assert said_nothing["HF_HUB_OFFLINE"] == "1" and said_nothing["PATH"] == "/bin"
    assert not downloads_refused(said_nothing)  # a Download asked for goes ahead

    said_offline = engine_environment({"HF_HUB_OFFLINE": "True"})
    assert said_offline["HF_HUB_OFFLINE"] == "1" and downloads_refused(said_offline)
    assert downloads_refused(engine_environment({"RAGDOLL_OFFLINE": "yes"}))
    # RAGDOLL_OFFLINE wins, and the environment made once stays the same made again
    # (the launcher makes it, then the engine's own start reads it).
    allowed = engine_environment({"HF_HUB_OFFLINE": "1", "RAGDOLL_OFFLINE": "0"})
    assert not downloads_refused(allowed)
    assert engine_environment(allowed) == allowed
    assert engine_environment(said_offline) == said_offline
