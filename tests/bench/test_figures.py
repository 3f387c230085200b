"""How a phase's figures are computed from the offers' clocks (bench/peers/apps/job.py)."""

from __future__ import annotations

from bench.peers.apps import job


def test_latency_runs_from_acceptance_and_throughput_from_the_first_offer() -> None:
    sent = {f"k{n}": 100.0 + n for n in range(10)}
    accepted = {key: at + 0.005 for key, at in sent.items()}  # each ack took 5 ms
    done = {key: at + 0.020 for key, at in sent.items()}  # 20 ms after each offer

    figures = job.phase_figures(sent, done, accepted)

    assert round(figures["p50_ms"], 6) == round(figures["p99_ms"], 6) == 15.0
    assert round(figures["p99_from_offer_ms"], 6) == 20.0
    assert figures["completed"] == 10
    assert round(figures["runs_per_s"], 3) == round(10 / 9.02, 3)


def test_runs_never_completed_are_left_out_and_none_completed_says_so() -> None:
    sent = {"a": 1.0, "b": 2.0}
    assert job.phase_figures(sent, {"a": 1.5}, {"a": 1.1, "b": 2.1})["completed"] == 1
    assert job.phase_figures(sent, {}, {}) == {"offered": 2, "completed": 0}
