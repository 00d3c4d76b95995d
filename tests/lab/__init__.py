"""The lab's quick forms. `./scripts/test` runs the concurrency forms alone, then the other files on
two workers, one worker per group below (`--dist loadgroup`), balanced by their times measured side
by side: the torture's quick forms (about 265 s), the fleet night (110 s) and the cluster checks
(20 s) on one; the effect forms (320 s) and the post-hook benchmark (60 s) on the other."""

from __future__ import annotations

import pytest

WITH_THE_TORTURE = pytest.mark.xdist_group("with_the_torture")
WITH_THE_EFFECT_FORMS = pytest.mark.xdist_group("with_the_effect_forms")
