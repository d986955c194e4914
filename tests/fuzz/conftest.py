"""Hypothesis profiles for the fuzzer: `ci` (the fast subset `make test` runs) and `deep` (`make fuzz`).

Select one with HYPOTHESIS_PROFILE (default ci). Every example shares the test's seeded database (that
is the point: a refused call is compared against the state the earlier calls left), so the
function-scoped-fixture health check is suppressed on purpose; database calls vary in time, so there is
no deadline. Failing examples are kept under .pytest_cache (already ignored by git).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase

# Hypothesis' own storage (example database, constants cache) under .pytest_cache, which git ignores,
# instead of a .hypothesis/ directory at the repository root.
HOME = Path(__file__).resolve().parents[2] / ".pytest_cache" / "hypothesis"
set_hypothesis_home_dir(HOME)
EXAMPLES = HOME / "examples"
SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

# ci: 12 parametrised tool tests x 30 examples (< 60 s with the real database and embedder), same cases every run
settings.register_profile(
    "ci",
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=SUPPRESSED,
    print_blob=True,
)
# deep: 12 x 900 = 10 800 cases, random each run; failures are replayed from the example database first
settings.register_profile(
    "deep",
    max_examples=900,
    deadline=None,
    database=DirectoryBasedExampleDatabase(EXAMPLES),
    suppress_health_check=SUPPRESSED,
    print_blob=True,
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
