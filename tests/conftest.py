import os

from hypothesis import HealthCheck, settings

# CI machines are shared and slow: no per-example deadlines, modest example counts.
settings.register_profile("kvwindow", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kvwindow"))

# Fixtures several test modules share.
from tests.support.csrc import built  # noqa: E402,F401
from tests.support.gate import wrong_position_report  # noqa: E402,F401 (one gate run, shared by its tests)
