"""Found jobs' trees (collect/jobs/job_trees.py): roots, workers, cut trees, left-out subtrees."""

from gputop_dl.collect.jobs.job_trees import (ancestors, excluded, job_cmap, job_roots,
                                              profile_target, tree)

# 1 init; 10 a shell; 100 a trainer with loader workers 101, 102 (102 forked a helper 103);
# 200 a torchrun agent with ranks 201, 202; 300 a trainer that another gputop-dl launched
# under trainer 100's tree (marked); 900 this gputop-dl, which launched 901 (marked)
PPID = {10: 1, 100: 10, 101: 100, 102: 100, 103: 102, 200: 10, 201: 200, 202: 200, 300: 101,
        900: 10, 901: 900}
CMAP: dict[int, list[int]] = {}
for _p, _pp in PPID.items():
    CMAP.setdefault(_pp, []).append(_p)
CAND = {100, 101, 102, 200, 201, 202, 300, 901}
MARKED = {300, 901}


def roots(skip=frozenset(), own=900):
    return job_roots(CAND, PPID, skip, own, MARKED.__contains__)


def test_workers_and_ranks_belong_to_their_parents_job():
    # 300 is a candidate child of one, but marked by a launch from it: a job of its own;
    # 901 is marked under this process: launched here, not a found job
    assert roots(skip={900}) == [100, 200, 300]


def test_a_left_out_root_takes_its_whole_subtree_with_it():
    skip = excluded({200, 4242}, PPID, CMAP)  # 4242: not listed, nothing under it
    assert skip == {200, 201, 202, 4242}
    assert roots(skip=skip | {900}) == [100, 300]


def test_a_jobs_tree_stops_where_another_job_begins():
    r = roots(skip={900})
    jcmap = job_cmap(CMAP, PPID, r, {900}, 900)
    assert sorted(tree(100, jcmap)) == [100, 101, 102, 103]  # 300 under 101 is its own job
    assert sorted(tree(300, jcmap)) == [300]
    assert sorted(tree(200, jcmap)) == [200, 201, 202]
    assert jcmap[10] == [900] and jcmap[101] == []  # this process's own edge is never cut
    assert CMAP[101] == [300]  # the listing's map is left as it was
    assert job_cmap(CMAP, PPID, [], set(), 900) is CMAP  # nothing to cut: the same map


def test_the_profiled_process_is_a_torchrun_agents_first_rank():
    assert profile_target(200, ("/usr/bin/python3", "/usr/bin/torchrun", "train.py"), CMAP, CAND) == 201
    assert profile_target(200, ("torchrun", "train.py"), CMAP, set()) == 200  # no rank found
    assert profile_target(100, ("python", "train.py"), CMAP, CAND) == 100


def test_ancestors_stop_at_the_top_and_at_a_loop():
    assert ancestors(103, PPID) == [102, 100, 10, 1]
    assert ancestors(5, {5: 6, 6: 5}) == [6]
