"""bench/hpa_dry_run.py's HPA arithmetic against the cases Kubernetes documents: desired =
ceil(current x metric / target), no change within the 10 % tolerance, the larger metric wins,
scale-up at most doubles (or adds 4 pods) per sync, scale-down waits out the 300 s window, and
the count stays within min..max."""
import sys

from inferd_harness import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
from hpa_dry_run import HorizontalPodAutoscaler  # noqa: E402


def test_desired_replicas_follow_the_ratio_outside_the_tolerance():
    hpa = HorizontalPodAutoscaler(min_replicas=2, max_replicas=10)
    assert hpa.sync(0, [(2 * 540, 500)]) == 2      # 540 per pod: within 10 % of 500
    assert hpa.sync(15, [(2 * 600, 500)]) == 3     # ceil(2 x 600/500) = 3
    assert hpa.sync(30, [(3 * 500, 500), (3 * 1.5, 1.2)]) == 4  # CPU 1.5 of 1.2 per pod: ceil(3 x 1.25)


def test_scale_up_is_limited_per_sync_and_by_max_replicas():
    hpa = HorizontalPodAutoscaler(min_replicas=2, max_replicas=10)
    assert hpa.sync(0, [(2 * 5000, 500)]) == 6     # wants 20: +4 pods (more than +100 % of 2)
    assert hpa.sync(15, [(6 * 5000, 500)]) == 10   # wants 60: max 10


def test_scale_down_waits_for_the_stabilisation_window():
    hpa = HorizontalPodAutoscaler(min_replicas=2, max_replicas=10, scale_down_window_s=300)
    assert hpa.sync(0, [(8 * 500 * 1.0, 500)]) == 6   # 4000 rps: 8 wanted, +4 from 2
    assert hpa.sync(15, [(4000, 500)]) == 8
    for t in range(30, 300, 15):                       # the load is gone, but 8 was wanted <= 300 s ago
        assert hpa.sync(t, [(100, 500)]) == 8, t
    assert hpa.sync(330, [(100, 500)]) == 2           # the window has passed: down to min
