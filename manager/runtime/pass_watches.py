"""What the runtime watches for the pass: the operator's children from start-up, the operand's
pods and CRDs, and the CRDs of the kinds add-ons serve. (A step names its own dependencies:
preflight.dependency_watches, facts.TLS_PROFILE_WATCHES, the upgrade gate's watch.)"""

from __future__ import annotations

from manager.apply import MANAGED_SELECTOR
from manager.client.watch_spec import WatchSpec
from manager.config import EffectiveConfig
from manager.names import CRD_API_VERSION, CRD_KIND, OPERAND_CRD_LABEL
from manager.render.state import renderable_kinds
from manager.sidetasks.console_quickstart import QUICKSTART_CRD_WATCH
from manager.steps.preflight import CERT_MANAGER_CRDS, MONITORING_CRDS, crd_watch

# Kinds whose status decides Ready (readiness.py): watched whole, so status changes count.
STATUS_KINDS = frozenset({"Deployment", "Certificate", "ValidatingWebhookConfiguration"})


CHILD_WATCHES = frozenset(
    WatchSpec(api_version, kind, label_selector=MANAGED_SELECTOR,
              with_status=kind in STATUS_KINDS, cached=True)
    for api_version, kind in renderable_kinds())
"""One watch per kind the renderer can produce, selected by the managed-by label, in every
namespace: the operator's own objects wherever they are (an operating namespace's Role, what a
moved operand left behind). They run from start-up, whatever the ESC says, and feed the
ObjectCache, so that even the first pass over a new ESC reads nothing it can know."""


def operand_pod_watch(namespace: str) -> WatchSpec:
    """The operand's pods, by the managed-by label their templates carry, in the operand
    namespace: their status explains a Deployment that is not available (readiness.py), so a
    change of it (scheduled, a container's waiting reason, a restart) must wake a pass. Not
    cached: the watch keeps one digest per pod (watches.pod_digest)."""
    return WatchSpec("v1", "Pod", namespace, label_selector=MANAGED_SELECTOR, with_status=True)


OPERAND_CRD_CHANGES = WatchSpec(CRD_API_VERSION, CRD_KIND, label_selector=OPERAND_CRD_LABEL,
                                any_change=True)
"""Any change of an operand CRD, status included (its storedVersions: the upgrade gate)."""

CHILD_CRD_WATCHES = frozenset(
    {crd_watch(CERT_MANAGER_CRDS[kind])
     for _, kind in renderable_kinds() if kind in CERT_MANAGER_CRDS}
    | {crd_watch(name) for name in MONITORING_CRDS} | {QUICKSTART_CRD_WATCH})
"""The CRDs of the child kinds add-ons serve (cert-manager's Certificate, the Prometheus
Operator's ServiceMonitor and PrometheusRule) and of the console's ConsoleQuickStart (the
operator's tour, sidetasks/console_quickstart.py): their arrival ends the wait of those
kinds' child watches, or applies the tour, and until then they vouch that the kinds are
absent, so that neither those watches nor a pass asks discovery about them
(apply/discovery.py)."""


def operand_crd_watch(config: EffectiveConfig) -> set[WatchSpec]:
    """With injector annotations on, newly installed operand CRDs get annotated at once (the
    upgrade gate's watch of them, when it is on: one watch for both)."""
    if not config.cert_manager.add_injector_annotations:
        return set()
    return {OPERAND_CRD_CHANGES}
