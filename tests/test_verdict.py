"""Unit tests of the verdict rules, at their boundaries, with hand-made evidence."""

from gputop_dl.analyse import verdict as V
from gputop_dl.analyse import verdict_confidence as C
from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence
from gputop_dl.analyse.verdict import judge as judge_verdict
from gputop_dl.present.verdict_text import job_line


def judge(*args, **kw) -> dict:
    """The verdict as its JSON (what every consumer reads)."""
    return judge_verdict(*args, **kw).to_json()


def job(name, slow=1.0, stall=0.05, solo_stall=0.05, gpus=(0,), device="cuda:0", steps=40,
        cores=1.0, solo_cores=1.0, workers=4, transforms="heavy", emulated=False, solo=True):
    return JobEvidence(name=name, device=device, gpus=gpus, steps=steps, step_time_s=0.1 * slow,
                       stall=stall, cpu_cores=cores, solo_step_time_s=0.1 if solo else None,
                       solo_stall=solo_stall, solo_cpu_cores=solo_cores, num_workers=workers,
                       transforms=transforms, emulated_device=emulated)


CALM = HostEvidence(cpus=16, busy=0.3, psi_some10=0.0, load1=4.0, throttled=0.0)
BUSY = HostEvidence(cpus=16, busy=0.97, psi_some10=0.4, load1=30.0, throttled=0.0)


def test_parallel_at_the_boundary():
    v = judge([job("a", 1.10, gpus=(0,)), job("b", 1.0, gpus=(1,))], CALM)
    assert v["kind"] == "parallel"
    assert v["evidence"]["stp"] == round(1 / 1.10 + 1, 3)


def test_just_above_boundary_is_not_parallel():
    v = judge([job("a", 1.11, gpus=(0,)), job("b", 1.0, gpus=(1,))], CALM)
    assert v["kind"] == "other"


def test_background_cpu_bound_case():
    # the lab notebooks' CPU-bound trio: slowdowns 2.60, 2.19, 1.99 -> STP 1.34, efficiency 0.45
    jobs = [job("bs32", 2.60, stall=0.5, solo_stall=0.1, gpus=(0,), solo_cores=5.0),
            job("bs64", 2.19, stall=0.45, solo_stall=0.1, gpus=(1,), solo_cores=5.0),
            job("bs128", 1.99, stall=0.4, solo_stall=0.1, gpus=(2, 3), solo_cores=8.0)]
    v = judge(jobs, BUSY)
    assert v["kind"] == "cpu-bound"
    assert v["evidence"]["stp"] == 1.344 and v["evidence"]["efficiency"] == 0.448
    recs = " ".join(v["recommendations"])
    assert "need ≈ 18.0 cores" in recs and "allows 16" in recs
    assert "transforms = \"light\"" in recs


def test_stall_rise_boundary():
    base = dict(gpus=(0,), solo_cores=0.5)
    host = HostEvidence(cpus=16, busy=0.95)
    rose = judge([job("a", 1.5, stall=0.15, solo_stall=0.10, **base),
                  job("b", 1.0, gpus=(1,), solo_cores=0.5)], host)
    assert rose["kind"] == "cpu-bound"
    flat = judge([job("a", 1.5, stall=0.149, solo_stall=0.10, **base),
                  job("b", 1.0, gpus=(1,), solo_cores=0.5)], host)
    assert flat["kind"] == "other"


def test_each_cpu_signal_fires_at_its_threshold():
    assert HostEvidence(cpus=4, busy=0.90).cpu_signals()
    assert not HostEvidence(cpus=4, busy=0.899).cpu_signals()
    assert HostEvidence(cpus=4, psi_some10=0.10).cpu_signals()
    assert not HostEvidence(cpus=4, psi_some10=0.099).cpu_signals()
    assert HostEvidence(cpus=4, load1=4.01).cpu_signals()
    assert not HostEvidence(cpus=4, load1=4.0).cpu_signals()
    assert HostEvidence(cpus=4, throttled=0.05).cpu_signals()
    assert not HostEvidence(cpus=4).cpu_signals()


def test_cpu_need_exceeding_cores_counts_without_stall_rise():
    jobs = [job("a", 1.6, stall=0.05, solo_stall=0.05, gpus=(0,), solo_cores=9),
            job("b", 1.6, stall=0.05, solo_stall=0.05, gpus=(1,), solo_cores=9)]
    assert judge(jobs, BUSY)["kind"] == "cpu-bound"


def test_gpu_contended_when_sharing_and_no_stall_rise():
    jobs = [job("a", 1.4, stall=0.02, solo_stall=0.03, gpus=(0,)),
            job("b", 1.4, stall=0.02, solo_stall=0.03, gpus=(0,))]
    v = judge(jobs, CALM)
    assert v["kind"] == "gpu-contended"
    assert v["evidence"]["shared_gpus"] == {"0": ["a", "b"]}
    assert "separate GPUs" in v["recommendations"][0]


def test_shared_gpu_with_stall_rise_and_saturated_cpu_is_cpu_bound():
    jobs = [job("a", 1.4, stall=0.30, solo_stall=0.03, gpus=(0,)),
            job("b", 1.4, stall=0.30, solo_stall=0.03, gpus=(0,))]
    assert judge(jobs, BUSY)["kind"] == "cpu-bound"
    assert judge(jobs, CALM)["kind"] == "gpu-contended"


def test_shared_gpu_with_stall_rise_and_calm_cpu_does_not_say_the_wait_stayed():
    """Seen on an H100: the heavy trio on one GPU, data-wait 1% -> 57-70%, host 79% busy.
    The verdict said "their data-wait did not rise": the reason must say it rose."""
    jobs = [job("bs32", 1.69, stall=0.57, solo_stall=0.01, gpus=(0,)),
            job("bs64", 2.09, stall=0.70, solo_stall=0.01, gpus=(0,))]
    v = judge(jobs, HostEvidence(cpus=16, busy=0.79, psi_some10=0.0, load1=12.0))
    assert v["kind"] == "gpu-contended"
    assert "did not rise" not in v["reason"]
    assert "data-wait of bs32, bs64 rose too" in v["reason"] and "79% of 16 cores" in v["reason"]
    assert any("loaders' CPU wait" in r for r in v["recommendations"])
    quiet = judge([job("a", 1.4, stall=0.02, solo_stall=0.03), job("b", 1.4, stall=0.02,
                                                                  solo_stall=0.03)], CALM)
    assert quiet["reason"].endswith("their data-wait did not rise")


def test_cpu_training_jobs_do_not_share_a_gpu():
    jobs = [job("a", 1.8, gpus=(0,), device="cpu"), job("b", 1.8, gpus=(0,), device="cpu")]
    v = judge(jobs, HostEvidence(cpus=2, busy=1.0))
    assert v["kind"] == "cpu-bound" and "train on the CPU" in v["reason"]
    assert "shared_gpus" not in v["evidence"]


def test_other_shows_nvml_throttle_reasons():
    host = HostEvidence(cpus=16, busy=0.3, gpu_util={0: 0.99, 1: 0.98},
                        gpu_throttle={0: ("hw_thermal_slowdown",)})
    v = judge([job("a", 1.5, gpus=(0,)), job("b", 1.5, gpus=(1,))], host)
    assert v["kind"] == "other"
    assert any("hw_thermal_slowdown" in line for line in v["evidence_lines"])


def test_insufficient_data_below_min_steps():
    v = judge([job("a", steps=V.MIN_STEPS - 1), job("b", gpus=(1,))], CALM)
    assert v["kind"] == "insufficient-data" and "a" in v["reason"]
    assert judge([], CALM)["kind"] == "insufficient-data"


def test_a_job_that_ran_apart_is_told_from_one_never_seen_stepping():
    """A script that made its steps while another was still starting (none of them in the
    window where all ran) is told apart from one whose DataLoader was never seen."""
    from dataclasses import replace

    apart = replace(job("a", steps=0), seen_steps=150, source="hook")
    blind = replace(job("b", steps=0, gpus=(1,)), seen_steps=0, source="hook")
    v = judge([apart, blind], CALM, final=True)
    assert v["kind"] == "insufficient-data"
    assert ("a made 150 steps, but not while every job was past its warm-up and running "
            "(they did not run together)") in v["reason"]
    assert "no DataLoader steps of b " in v["reason"] and "of a" not in v["reason"]
    live = judge([apart, blind], CALM)["reason"]
    assert "a made 150 steps" in live and "did not run together" not in live


def test_no_baseline_names_the_signals():
    v = judge([job("a", solo=False), job("b", solo=False, gpus=(1,))], BUSY)
    assert v["kind"] == "no-baseline" and "CPU busy" in v["reason"]
    v = judge([job("a", solo=False), job("b", solo=False, gpus=(1,))], CALM)
    assert "no CPU saturation" in v["reason"]


def test_confidence_rises_with_steps():
    few = judge([job("a", steps=5), job("b", steps=5, gpus=(1,))], CALM)["confidence"]
    many = judge([job("a", steps=60), job("b", steps=60, gpus=(1,))], CALM)["confidence"]
    assert 0 < few < many == 1.0


def test_same_evidence_same_verdict():
    jobs = [job("a", 1.7, stall=0.4, solo_stall=0.1), job("b", 1.6, gpus=(1,), stall=0.4,
                                                          solo_stall=0.1)]
    assert judge(jobs, BUSY) == judge(list(jobs), BUSY)


def test_a_noisy_solo_baseline_is_flagged_and_halves_the_confidence():
    quiet = judge([job("a", 1.6, stall=0.3, solo_stall=0.05, gpus=(0,)),
                   job("b", 1.5, stall=0.3, solo_stall=0.05, gpus=(1,))], BUSY)
    noisy_a = JobEvidence(**{**job("a", 1.6, stall=0.3, solo_stall=0.05, gpus=(0,)).__dict__,
                             "solo_cv": 0.27})
    v = judge([noisy_a, job("b", 1.5, stall=0.3, solo_stall=0.05, gpus=(1,))], BUSY)
    assert v["kind"] == quiet["kind"] == "cpu-bound"
    assert v["confidence"] == round(quiet["confidence"] / 2, 2)
    assert v["evidence"]["noisy_baselines"] == {"a": 0.27}
    assert any("a step-time CV 0.27" in line for line in v["evidence_lines"])
    assert any("quieter machine" in r for r in v["recommendations"])
    at_limit = JobEvidence(**{**noisy_a.__dict__, "solo_cv": V.NOISY_CV})
    assert "noisy_baselines" not in judge([at_limit], BUSY)["evidence"]


def test_a_job_faster_beside_the_others_than_alone_is_said_and_halves_the_confidence():
    """Seen in a trial of the probe: one job of the CPU-bound trio at 0.73x beside 1.7-2.0x.
    Its solo figure was slow; the verdict keeps its kind, says so and halves the confidence
    once (not again where a noisy baseline halved it)."""
    base = [job("b", 2.0, stall=0.3, solo_stall=0.05, gpus=(1,)),
            job("c", 1.8, stall=0.3, solo_stall=0.05, gpus=(2,))]
    ok = judge([job("a", 1.9, stall=0.3, solo_stall=0.05)] + base, BUSY)
    v = judge([job("a", 0.73, stall=0.3, solo_stall=0.05)] + base, BUSY)
    assert v["kind"] == ok["kind"] == "cpu-bound"
    assert "faster_than_alone" not in ok["evidence"]
    assert v["evidence"]["faster_than_alone"] == {"a": 0.73}
    assert any(line.startswith("faster beside the others than alone: a 0.73×")
               for line in v["evidence_lines"])
    assert sum("quieter machine" in r for r in v["recommendations"]) == 1
    at_limit = judge([job("a", V.FASTER, stall=0.3, solo_stall=0.05)] + base, BUSY)
    assert "faster_than_alone" not in at_limit["evidence"]
    assert v["confidence"] == round(at_limit["confidence"] / 2, 2)
    noisy = JobEvidence(**{**job("a", 0.73, stall=0.3, solo_stall=0.05).__dict__, "solo_cv": 0.27})
    both = judge([noisy] + base, BUSY)
    assert both["confidence"] == v["confidence"]  # halved once, not twice
    assert sum("quieter machine" in r for r in both["recommendations"]) == 1


def test_a_single_slowed_job_is_not_blamed_on_other_jobs():
    v = judge([job("solo", 1.3, gpus=(0,))], CALM)
    assert v["kind"] == "other"
    assert "no other launched job beside it" in v["reason"]


def test_step_stats_keep_an_unknown_batch_unknown():
    from gputop_dl.analyse.stats.jobstats import step_stats

    known = [{"t_step": 0.5, "t_data": 0.1, "samples": 8}] * 4
    assert step_stats(known, warmup=0).samples_per_s == 16.0
    unknown = known[:3] + [{"t_step": 0.5, "t_data": 0.1, "samples": None}]
    st = step_stats(unknown, warmup=0)
    assert st.samples_per_s is None and st.stall_fraction == 0.2 and st.step_time_s == 0.5


# --- confidence from the measured spread ---------------------------------------------------------

def measured(name, slow, steps, cv, solo_steps=8, solo_cv=0.05, gpus=(0,), **kw):
    return JobEvidence(**{**job(name, slow, steps=steps, gpus=gpus, **kw).__dict__, "cv": cv,
                          "solo_cv": solo_cv, "solo_steps": solo_steps})


def test_student_t_cdf_matches_tables():
    # two-sided 95 % points: df 1 -> 12.706, df 4 -> 2.776, df 30 -> 2.042
    for t, df in ((12.706, 1), (2.776, 4), (2.042, 30)):
        assert abs(C.student_t_cdf(t, df) - 0.975) < 5e-4
    assert C.student_t_cdf(0.0, 3) == 0.5
    assert abs(C.student_t_cdf(-2.776, 4) - 0.025) < 5e-4


def test_few_steps_of_an_unmistakable_slowdown_are_confident():
    # the README trio on 2 cores: bs128 runs 4 co-run steps, 1.8x slower, CV 0.1
    v = judge([measured("a", 1.8, 4, 0.1, gpus=(0,)), measured("b", 1.9, 12, 0.1, gpus=(1,))],
              BUSY)
    assert v["kind"] != "parallel" and v["confidence"] >= 0.95
    old = min(4, 12) / C.FULL_CONFIDENCE_STEPS
    assert old < 0.2  # what the step-count rule said


def test_a_slowdown_near_the_line_with_a_wide_spread_is_unsure():
    v = judge([measured("a", 1.12, 8, 0.3, gpus=(0,)), measured("b", 1.0, 8, 0.3, gpus=(1,))],
              CALM)
    assert v["kind"] == "other" and 0.5 <= v["confidence"] < 0.7


def test_parallel_counts_the_least_sure_job():
    sure = measured("a", 1.0, 30, 0.05, gpus=(0,))
    unsure = measured("b", 1.08, 5, 0.3, gpus=(1,))
    v = judge([sure, unsure], CALM)
    assert v["kind"] == "parallel"
    assert v["confidence"] == round(C.side_probability(unsure), 2) < 0.7
    assert judge([sure, measured("b", 1.0, 30, 0.05, gpus=(1,))], CALM)["confidence"] == 1.0


def test_a_noisy_baseline_whose_spread_is_counted_is_not_halved_again():
    noisy = judge([measured("a", 1.6, 10, 0.1, solo_cv=0.3, stall=0.3, solo_stall=0.05),
                   measured("b", 1.5, 10, 0.1, solo_cv=0.3, gpus=(1,), stall=0.3,
                            solo_stall=0.05)], BUSY)
    assert "noisy_baselines" in noisy["evidence"]
    p = max(C.side_probability(measured(n, s, 10, 0.1, solo_cv=0.3)) for n, s in
            (("a", 1.6), ("b", 1.5)))
    assert noisy["confidence"] == round(p, 2)


def test_without_step_times_a_measured_cpu_need_and_starvation_make_it_cpu_bound():
    starved = [job(n, solo=False, cores=0.66, solo_cores=1.9, gpus=(), device="cpu", steps=0)
               for n in "abc"]
    v = judge(starved, HostEvidence(cpus=2, busy=0.99), "probe", need_steps=0)
    assert v["kind"] == "cpu-bound" and v["evidence"]["solo_cpu_need_cores"] == 5.7
    assert all(j["slowdown"] is None for j in v["jobs"])
    # the same need, but each job got as much CPU together as alone: not starved, no claim
    fed = [job(n, solo=False, cores=1.0, solo_cores=1.05, gpus=(), device="cpu", steps=0)
           for n in "ab"]
    v = judge(fed, HostEvidence(cpus=2, busy=0.99), "probe", need_steps=0)
    assert v["kind"] == "no-baseline" and "judged on signals alone" in v["reason"]


def test_no_signal_still_shows_how_busy_the_host_was():
    v = judge([job("a", solo=False), job("b", solo=False, gpus=(1,))],
              HostEvidence(cpus=2, busy=0.89))
    assert "no CPU saturation signal fires (host busy 89% of 2 cores; the signal is 90%)" \
        in v["reason"]


def test_a_mean_step_ratio_apart_from_the_medians_is_shown_beside_it():
    import dataclasses

    from gputop_dl.analyse.stats.jobstats import step_stats

    # bimodal co-run: most steps 2x the solo step, every third one 5x (the loader fell behind)
    solo = step_stats([{"t_step": 0.1, "t_data": 0.0, "samples": 8}] * 30, warmup=0, window=0)
    co = step_stats([{"t_step": t, "t_data": 0.0, "samples": 8} for t in [0.2, 0.2, 0.5] * 10],
                    warmup=0, window=0)
    assert (co.step_time_s, round(co.mean_step_s, 3), round(solo.mean_step_s, 3)) == (0.2, 0.3, 0.1)
    a = dataclasses.replace(job("a", 2.0), mean_step_time_s=co.mean_step_s,
                            solo_mean_step_time_s=solo.mean_step_s)
    b = dataclasses.replace(job("b", 2.0, gpus=(1,)), mean_step_time_s=0.205,
                            solo_mean_step_time_s=0.1)  # within 10 %: the median alone
    v = judge([a, b], BUSY)
    ja, jb = v["jobs"]
    assert (ja["slowdown"], ja["mean_slowdown"]) == (2.0, 3.0)
    assert "(2.00×; mean step 3.00×)" in job_line(ja)
    assert jb["mean_slowdown"] == 2.05 and "mean step" not in job_line(jb)
    assert job("c").mean_slowdown is None  # an older baseline without a mean: unknown


class _Run:
    """A co-run job as gather() reads it (engine/jobrun.py's JobRun has these fields)."""

    def __init__(self, name, step_s, solo_s, config, seen_gpus):
        self.name, self.config, self.seen_gpus = name, config, seen_gpus
        self.info, self.device, self.cpu, self.ended = {}, "cuda:0", [], None
        self.steps = [dict(t=1.0 + i * step_s, t_step=step_s, t_data=0.005, samples=8)
                      for i in range(40)]
        self.solo = {"step_time_s": solo_s, "stall_fraction": 0.1, "cpu_cores": 1.0,
                     "cv": 0.02, "steps": 40}


def test_command_jobs_seen_on_one_gpu_share_it():
    """Seen on an H100: two `command` jobs (no `gpus` in the file) on GPU 0, each 1.42x
    slower, were judged "slowed on separate devices". NVML saw both on GPU 0."""
    from gputop_dl.analyse.recorded.evidence import gather

    cmd = {"command": ["python3", "train.py"], "warmup_steps": 2}
    runs = [_Run("plain", 0.092, 0.065, cmd, {0}), _Run("plain2", 0.093, 0.065, cmd, {0})]
    jobs, host = gather(runs, [], [], 16, now=100.0)
    assert [j.gpus for j in jobs] == [(0,), (0,)]
    v = judge(jobs, CALM)
    assert v["kind"] == "gpu-contended" and v["evidence"]["shared_gpus"] == {"0": ["plain", "plain2"]}
    apart = [_Run("plain", 0.092, 0.065, cmd, {0}), _Run("plain2", 0.093, 0.065, cmd, {1})]
    assert judge(gather(apart, [], [], 16, now=100.0)[0], CALM)["kind"] == "other"
    declared = [_Run("a", 0.092, 0.065, dict(cmd, gpus=[1]), {0}),
                _Run("b", 0.093, 0.065, dict(cmd, gpus=[2]), {0})]
    assert [j.gpus for j in gather(declared, [], [], 16, now=100.0)[0]] == [(1,), (2,)]
