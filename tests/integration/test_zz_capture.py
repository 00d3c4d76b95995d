# temporary: capture real report excerpts for docs/landed-verification.md
import json
from tests.integration.test_conflict_runner import *  # noqa
from tests.integration.test_conflict_posthook import report  # noqa

def test_capture(scenario, report):
    out = {}
    for rep, names in ((scenario.report, ["conflict_merge_unsafe", "conflict_merge_contested"]),
                       (report, ["conflict_hooked_append"])):
        for name in names:
            node = rep.node(name).to_dict()
            for h in node["history"]:
                h["message"] = (h["message"] or "")[:160] + "..."
            out[name] = node
    json.dump(out, open("/tmp/landed_capture.json", "w"), indent=2)
