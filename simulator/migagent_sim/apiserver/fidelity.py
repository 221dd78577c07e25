"""Where the fake API server deliberately answers differently from the real kube-apiserver.

tests/realkube/test_fidelity.py sends one scripted sequence of every kind of request the agent makes
to both servers and compares what the agent reads of each answer (status, Status reason and causes,
Retry-After, the fields it uses). Each step that differs is named here with the reason the fake
keeps the difference; the test fails when the differing steps are not exactly these, so a difference
fixed in the fake, or a new one, must be recorded here.

The sequence: get its Node (and a missing one: 404), list Nodes (403), strategic-merge, merge and JSON
patches of labels and annotations, a patch with a stale resourceVersion (409), an unsupported content
type (415), cordon and uncordon with the mark, a label the admission policy refuses (403 with its
cause), the MigConfigReady condition on /status twice (merged by type), Events in `default` and
elsewhere (403), pod lists by node, label and name, a pod GET (403), budget lists, evictions (429 with
the DisruptionBudget cause and no Retry-After; 201; again while terminating; 404), a pod DELETE the
overlay does not grant (403), and watches from a recent and from an old resourceVersion.
Fixed in the fake after the first comparison: a policy's 403 now names its denial as the Status's one
cause (`details.causes[0].message`), as the admission plugin's does.
"""

from __future__ import annotations

from types import MappingProxyType

DELIBERATE_DIFFERENCES: MappingProxyType[str, str] = MappingProxyType(
    {
        "watch the node from an expired resourceVersion": (
            "A watch from resourceVersion 1 on a server started moments before: the real watch cache, which"
            " begins at its own start, answers with the node's current state as one ADDED event; the fake"
            " keeps its whole change history and replays every MODIFIED since (it answers ERROR 410 only"
            " after compact(), which the agent's 410 tests use). Modelling the watch cache's window is not"
            " worth it: the agent reads the labels of whatever event arrives, and relists on 410 either way."
        ),
    }
)
