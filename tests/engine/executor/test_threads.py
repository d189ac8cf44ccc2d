import torch

from engine.executor import threads
from engine.executor.threads import fitted_threads, fitted_to_free_cores, others_running


def test_threads_are_the_cores_the_others_leave() -> None:
    assert fitted_threads(default=2, cores=2, others_running=0) == 2
    assert fitted_threads(default=2, cores=2, others_running=1) == 1
    # a busy machine still gets one thread, never more than torch's default
    assert fitted_threads(default=2, cores=2, others_running=7) == 1
    assert fitted_threads(default=4, cores=16, others_running=2) == 4
    assert fitted_threads(default=2, cores=2, others_running=None) == 2


def test_others_running_leaves_out_the_reader() -> None:
    assert others_running(read=lambda: "4.38 4.20 3.57 6/140 17907\n") == 5
    assert others_running(read=lambda: "0.00 0.01 0.05 1/90 12\n") == 0
    assert others_running(read=lambda: "garbage") is None

    def missing() -> str:
        raise FileNotFoundError("/proc/loadavg")

    assert others_running(read=missing) is None


def test_the_block_runs_with_the_fitted_count_and_puts_it_back(monkeypatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "others_running", lambda: 1)
    with fitted_to_free_cores(default=2) as n:
        assert n == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
